package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/apiclient"
)

func init() { register(newPeersCmd) }

func newPeersCmd() *cobra.Command {
	return showCmd("peers", "List the libp2p peers the node is connected to, the path to each (direct, relayed, hole-punched), and how others reach this node",
		(*apiclient.Client).Peers, func(tw *tabwriter.Writer, doc api.PeersDoc) {
			nat := doc.NAT
			fmt.Fprintf(tw, "reachability\t%s\n", nat.Reachability)
			fmt.Fprintf(tw, "advertised\t%s\n", orNone(nat.Advertised))
			if len(nat.Relays) > 0 {
				fmt.Fprintf(tw, "relays\t%s\n", strings.Join(nat.Relays, " "))
			}
			fmt.Fprintf(tw, "hole punches\t%d succeeded, %d failed\n\n", nat.HolePunchesSucceeded, nat.HolePunchesFailed)
			fmt.Fprintln(tw, "PEER\tPATH\tLATENCY\tADDRS")
			for _, p := range doc.Peers {
				lat := "-"
				if p.LatencyMs != nil {
					lat = fmt.Sprintf("%.1fms", *p.LatencyMs)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.PeerID, p.Path, lat, strings.Join(p.Addrs, " "))
			}
		})
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, " ")
}
