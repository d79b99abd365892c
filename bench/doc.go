// Package bench compares IACP with a raw go-libp2p echo and with NATS, in one
// process and in interleaved rounds, so that every figure it reports is a ratio between
// systems measured under the same load. It lives in its own module (bench/go.mod) so that the
// node does not depend on NATS: nothing outside this directory imports it, and the root
// module's go.mod, `go build ./...`, `go test ./...` and `make test` never see it.
//
// Apart from barehost (a bare go-libp2p host, the floor under the idle node's memory, run by
// `make idle-floor`), it has no code outside its tests; run them from the repository root with
//
//	make bench-compare
//
// or here with
//
//	go test -run '^$' -bench . -benchtime 1x -timeout 30m -args -rounds 10 -requests 500
//
// BenchmarkRTT compares request/response round trips with a 1 KiB payload; BenchmarkOneWay
// compares signed one-way messages per second from 256 concurrent senders. Their doc
// comments say what each system does; docs/bench.md has a table from one run.
package bench
