// Package netlab builds small networks of Linux network namespaces on one machine, for tests
// of what crosses real networks: hosts with their own addresses and routes, an "internet"
// segment, and home networks behind NAT routers (nftables masquerade, endpoint-independent or
// fully random for a symmetric NAT), which a test can cut off and heal, and between which a
// host can move. Its tests start the real iacp-node binary in each host and run the
// scenarios of docs/deploy.md ("What the lab proves").
//
// Every name a lab makes (namespaces; the links live inside them) starts with "nl-", the pid
// of the process that made it and a random tag, so two runs never collide, and a later run
// removes what a killed run left behind (Sweep) without touching a live run's lab. Close
// kills the processes started in the lab's hosts and deletes its namespaces, which takes
// their links, bridges and NAT rules with them; the tests close every lab they make, on
// failure and on SIGINT or SIGTERM too.
//
// Nothing leaves the machine: the internet segment is a bridge inside a namespace of the lab,
// no link reaches the machine's own network namespace, and no host has a route beyond the
// lab's subnets. The internet's addresses are ones go-libp2p counts as public (1.2.0.0/24,
// as go-libp2p's own hole-punching tests use), because what a node advertises, AutoNAT and
// hole punching all depend on an address being public; inside the lab they reach nothing but
// the lab's hosts.
//
// A lab needs root, iproute2's `ip netns` and nftables' `nft`; Available says which is
// missing. The kernel here has no netem, so the lab has no latency or loss: links are
// instant and lossless, and a partition drops everything.
package netlab
