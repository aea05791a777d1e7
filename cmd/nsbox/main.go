// Command nsbox runs untrusted code in fresh Linux sandboxes.
package main

import (
	"fmt"
	"os"

	"github.com/nsbox/nsbox/container"
)

func main() {
	// The re-exec'd sandbox init runs before anything else; it never returns.
	container.MaybeInit()

	if err := run(os.Args); err != nil {
		if msg := err.Error(); msg != "" {
			fmt.Fprintf(os.Stderr, "nsbox: %s\n", msg)
		}
		os.Exit(exitCode(err))
	}
}
