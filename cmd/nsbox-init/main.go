// Command nsbox-init is the init of nsbox sandboxes: the engine execs a
// sealed copy of it as the first process of every sandbox. It is the
// sandboxinit package alone, so it starts in about a millisecond (the full
// nsbox binary, which can act as init too, takes several).
package main

import (
	"fmt"
	"os"

	"github.com/nsbox/nsbox/container/sandboxinit"
)

func main() {
	if !sandboxinit.Is() {
		fmt.Fprintln(os.Stderr, "nsbox-init: the init of nsbox sandboxes; nsbox starts it, it is not run by hand")
		os.Exit(2)
	}
	sandboxinit.Run()
}
