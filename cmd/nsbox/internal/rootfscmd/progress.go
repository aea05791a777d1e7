package rootfscmd

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
	"github.com/nsbox/nsbox/rootfs"
)

// progressPrinter shows one live line per build phase: redrawn in place on a
// terminal, one line per message otherwise.
type progressPrinter struct {
	w       io.Writer
	tty     bool
	phase   string
	start   time.Time
	started time.Time
	open    bool
}

func newProgressPrinter(f *os.File) *progressPrinter {
	now := time.Now()
	return &progressPrinter{w: f, tty: cmdline.IsTerminal(f), start: now, started: now}
}

func (p *progressPrinter) print(ev rootfs.Progress) {
	if ev.Phase != p.phase {
		p.end()
		p.phase, p.started = ev.Phase, time.Now()
	}
	line := fmt.Sprintf("%-9s", ev.Phase)
	if ev.Percent >= 0 {
		line += fmt.Sprintf(" %3.0f%%", ev.Percent)
	} else {
		line += "     "
	}
	line += "  " + ev.Message
	if p.tty {
		if len(line) > 110 {
			line = line[:110]
		}
		fmt.Fprintf(p.w, "\r\033[2K%s", line)
		p.open = true
		return
	}
	if ev.Percent >= 0 && ev.Percent < 100 && int(ev.Percent)%25 != 0 {
		return // keep logs short: quarter steps only
	}
	fmt.Fprintln(p.w, line)
}

// end closes the current phase's line with its duration.
func (p *progressPrinter) end() {
	if p.open {
		fmt.Fprintf(p.w, "  (%s)\n", time.Since(p.started).Round(100*time.Millisecond))
		p.open = false
	}
}
