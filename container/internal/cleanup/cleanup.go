// Package cleanup rolls back half-built state: a multi-step set-up registers
// the undo of each step as it succeeds, defers Clean, and calls Release once
// the whole set-up has succeeded (gVisor's pkg/cleanup).
//
//	cu := cleanup.Make(func() { lock.Close() })
//	defer cu.Clean()
//	cg, err := create()
//	if err != nil {
//		return err // the lock is closed
//	}
//	cu.Add(func() { cg.Delete() })
//	...
//	cu.Release() // success: nothing is undone
package cleanup

// Cleanup holds undo functions, run in reverse order of their addition.
// The zero value is ready to use.
type Cleanup struct {
	fns []func()
}

// Make returns a Cleanup holding f (nil is allowed).
func Make(f func()) Cleanup {
	c := Cleanup{}
	c.Add(f)
	return c
}

// Add registers f to run before the functions added so far.
func (c *Cleanup) Add(f func()) {
	if f != nil {
		c.fns = append(c.fns, f)
	}
}

// Clean runs the registered functions, last added first, and forgets them:
// a second Clean, or a Clean after Release, does nothing.
func (c *Cleanup) Clean() {
	run(c.fns)
	c.fns = nil
}

// Release forgets the registered functions without running them and
// returns a function that runs them (for an owner that undoes the set-up
// later, e.g. at teardown).
func (c *Cleanup) Release() func() {
	fns := c.fns
	c.fns = nil
	return func() { run(fns) }
}

func run(fns []func()) {
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}
