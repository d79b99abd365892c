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
	return showCmd("peers", "List the libp2p peers the node is connected to", (*apiclient.Client).Peers, func(tw *tabwriter.Writer, doc api.PeersDoc) {
		fmt.Fprintln(tw, "PEER\tLATENCY\tADDRS")
		for _, p := range doc.Peers {
			lat := "-"
			if p.LatencyMs != nil {
				lat = fmt.Sprintf("%.1fms", *p.LatencyMs)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", p.PeerID, lat, strings.Join(p.Addrs, " "))
		}
	})
}
