package mocknet

import "github.com/libp2p/go-libp2p/core/peer"

// What the simulator added to go-libp2p's mocknet: links made on a pair's first dial, links
// removed per peer or all at once, and the schedule of the streams' writes.

// linkOnDemand returns a link from pn to p made for this dial, when the linker allows one. It
// is removed when its last connection closes (link.release).
func (mn *mocknet) linkOnDemand(pn *peernet, p peer.ID) (*link, bool) {
	mn.Lock()
	linker, target := mn.linker, mn.nets[p]
	mn.Unlock()
	if linker == nil || target == nil {
		return nil, false
	}
	opts, ok := linker(pn.peer, p)
	if !ok {
		return nil, false
	}
	l := newLink(mn, opts)
	l.onDemand = true
	l.nets = append(l.nets, pn, target)
	mn.addLink(l)
	return l, true
}

// SetLinker sets what a dial between unlinked peers asks (see Mocknet).
func (mn *mocknet) SetLinker(l Linker) {
	mn.Lock()
	mn.linker = l
	mn.Unlock()
}

// UnlinkPeer removes every link of p.
func (mn *mocknet) UnlinkPeer(p peer.ID) {
	mn.Lock()
	var ls []*link
	for _, m := range mn.links[p] {
		for l := range m {
			ls = append(ls, l)
		}
	}
	mn.Unlock()
	for _, l := range ls {
		mn.removeLink(l)
	}
}

// UnlinkAll removes every link.
func (mn *mocknet) UnlinkAll() {
	mn.Lock()
	mn.links = map[peer.ID]map[peer.ID]map[*link]struct{}{}
	mn.Unlock()
}

// SetSchedule sets when the streams' writes become readable (see Mocknet).
func (mn *mocknet) SetSchedule(s Schedule) {
	mn.Lock()
	mn.schedule = s
	mn.Unlock()
}
