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

	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "nsbox: %v\n", err)
		os.Exit(exitCode(err))
	}
}
