package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/iacp-node/iacp-node/protocol"
)

// maxInputBytes bounds documents read from files or standard input.
const maxInputBytes = protocol.DefaultMaxMessageBytes

// readInput reads the named file, or standard input when name is "" or "-".
func readInput(stdin io.Reader, name string) ([]byte, error) {
	r := stdin
	if name != "" && name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxInputBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxInputBytes {
		return nil, fmt.Errorf("input is larger than %d bytes", maxInputBytes)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil, fmt.Errorf("input is empty: give a file or pipe a JSON or YAML document")
	}
	return b, nil
}

func protocolVersions() string { return strings.Join(protocol.SupportedVersions, ", ") }

// listenHint adds to an error of the node's start that a listen address is taken which flag
// chooses another (the local API's own error names --api already).
func listenHint(err error) error {
	if err == nil || !(errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")) {
		return err
	}
	return fmt.Errorf("%w; another process holds a listen address of the node: choose others with --listen /ip4/127.0.0.1/tcp/PORT (env IACP_LISTEN, config listen)", err)
}
