package interp

import (
	"strconv"
	"sync"
)

// CwdContext is the Python context nsbox's own cells run in when they
// move the interpreter between its contexts' working directories (its
// variables are nobody's; its count is not a context's).
const CwdContext = "nsbox-cwd"

// Cwds gives Python contexts working directories of their own, though
// they share one interpreter (E2B runs a kernel per context): in a
// sandbox that has a Python context whose cwd is not its home, a cell of
// another context than the last one's first moves the interpreter to the
// context's directory (where it was when that context's last cell ended,
// so a cell's own os.chdir stays with its context), by a cell of nsbox's
// own in CwdContext. A directory the sandbox's user cannot enter (/root:
// it is uid 1000) leaves the interpreter where it was, as the %cd of E2B's
// server does when it fails. Sandboxes without such a context pay nothing.
type Cwds struct {
	mu sync.Mutex
	m  map[string]*cwds
}

// cwds is one sandbox's: mu is held across a switch and the cell after it.
type cwds struct {
	mu  sync.Mutex
	in  string            // the context whose directory the interpreter is in
	now map[string]string // where each context left it
}

// Run runs Python in CwdContext and returns its standard output.
type Run func(code string) (string, error)

// Enter makes the interpreter's working directory context c's before a
// cell of it (c.Cwd is where a context that has not run yet starts;
// home, the default's). The cell runs before release is called.
func (w *Cwds) Enter(sandbox string, c Context, home string, run Run) (release func(), err error) {
	w.mu.Lock()
	st := w.m[sandbox]
	if st == nil {
		if c.Cwd == home || c.Cwd == "" {
			w.mu.Unlock()
			return func() {}, nil
		}
		if w.m == nil {
			w.m = map[string]*cwds{}
		}
		st = &cwds{in: DefaultID, now: map[string]string{}}
		w.m[sandbox] = st
	}
	w.mu.Unlock()
	st.mu.Lock()
	if st.in == c.ID {
		return st.mu.Unlock, nil
	}
	to, ok := st.now[c.ID]
	if !ok {
		to = c.Cwd
	}
	was, err := run("import os as _o\nprint(_o.getcwd(), end='')\ntry: _o.chdir(" + strconv.Quote(to) + ")\nexcept OSError: pass")
	if err != nil {
		st.mu.Unlock()
		return nil, err
	}
	st.now[st.in], st.in = was, c.ID
	return st.mu.Unlock, nil
}

// Forget drops a sandbox's record (it ended, or its interpreter was
// started afresh in its home).
func (w *Cwds) Forget(sandbox string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, sandbox)
}
