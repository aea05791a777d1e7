package build

import (
	"bufio"
	"bytes"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/nsbox/nsbox/rootfs"
)

var (
	ansiRE = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)
	// mmdebstrap's progress bar: "downloading:  42.00 [=====>    ]", the
	// status word being absent for some steps.
	barRE = regexp.MustCompile(`^(?:([a-z]+):)?\s*([0-9]+(?:\.[0-9]+)?) \[`)
)

// mmdebstrapParser turns mmdebstrap's terminal output into Progress events
// and keeps the last lines for error messages.
type mmdebstrapParser struct {
	emit    func(rootfs.Progress)
	phase   string
	percent int
	tail    []string
}

const tailLines = 40

// parseMmdebstrap reads mmdebstrap output (lines end in \n or \r; ANSI
// colours allowed) until EOF or a read error, which it does not report.
func parseMmdebstrap(r io.Reader, emit func(rootfs.Progress)) *mmdebstrapParser {
	p := &mmdebstrapParser{emit: emit, phase: "setup", percent: -1}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sc.Split(splitCRLF)
	for sc.Scan() {
		p.line(sc.Text())
	}
	return p
}

func splitCRLF(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

var infoPhases = []struct{ prefix, phase string }{
	{"downloading packages", "download"},
	{"extracting archives", "extract"},
	{"installing", "install"},
	{"cleaning package lists", "trim"},
}

func (p *mmdebstrapParser) line(raw string) {
	l := strings.TrimSpace(ansiRE.ReplaceAllString(raw, ""))
	if l == "" || l == "done" {
		return
	}
	if m := barRE.FindStringSubmatch(l); m != nil {
		// The percentage is of the step the last "I:" line announced.
		f, _ := strconv.ParseFloat(m[2], 64)
		if int(f) == p.percent {
			return
		}
		p.percent = int(f)
		msg := m[1]
		if msg == "" {
			msg = p.phase
		}
		p.emit(rootfs.Progress{Phase: p.phase, Percent: f, Message: msg})
		return
	}
	p.tail = append(p.tail, l)
	if len(p.tail) > tailLines {
		p.tail = p.tail[1:]
	}
	if msg, ok := strings.CutPrefix(l, "I: "); ok {
		for _, ip := range infoPhases {
			if strings.HasPrefix(msg, ip.prefix) {
				p.phase = ip.phase
				break
			}
		}
		p.percent = -1
		p.emit(rootfs.Progress{Phase: p.phase, Percent: -1, Message: msg})
		return
	}
	if strings.HasPrefix(l, "E: ") || strings.HasPrefix(l, "W: ") {
		p.emit(rootfs.Progress{Phase: p.phase, Percent: -1, Message: l})
	}
}

var mirrorFailures = []string{
	"Could not resolve", "Temporary failure resolving", "Failed to fetch",
	"Unable to connect", "Could not connect", "Connection refused",
	"No route to host", "apt-get update failed", "is not signed",
	"does not have a Release file",
}

// failure classifies why mmdebstrap failed from its last output lines.
func (p *mmdebstrapParser) failure() (detail string, kind error) {
	var firstErr string
	for _, l := range p.tail {
		if strings.Contains(l, "No space left on device") {
			return l, rootfs.ErrNoSpace
		}
	}
	for _, l := range p.tail {
		for _, f := range mirrorFailures {
			if strings.Contains(l, f) {
				return l, ErrMirrorUnreachable
			}
		}
		if firstErr == "" && strings.HasPrefix(l, "E: ") {
			firstErr = l
		}
	}
	if firstErr == "" && len(p.tail) > 0 {
		firstErr = p.tail[len(p.tail)-1]
	}
	return firstErr, ErrBuildFailed
}
