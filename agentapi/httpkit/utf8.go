package httpkit

import (
	"io"
	"unicode/utf8"

	"github.com/nsbox/nsbox/daemon/errdefs"
)

// utf8Reader passes a JSON body through and fails at the first byte that is
// not UTF-8. encoding/json would otherwise turn such bytes into U+FFFD
// silently, and a file's text or a run's code would change on its way in.
type utf8Reader struct {
	r     io.Reader
	carry [utf8.UTFMax]byte // an incomplete sequence at the end of the last read
	nc    int
	off   int64 // offset of the first byte not yet checked (carry's first byte)
}

func (u *utf8Reader) Read(p []byte) (int, error) {
	n, err := u.r.Read(p)
	buf := p[:n]
	if u.nc > 0 { // check the held bytes together with what follows them
		buf = append(u.carry[:u.nc:u.nc], p[:n]...)
	}
	safe := len(buf) // check up to the start of an incomplete last sequence
	if err == nil {
		for i := len(buf) - 1; i >= 0 && i >= len(buf)-utf8.UTFMax; i-- {
			if utf8.RuneStart(buf[i]) {
				if !utf8.FullRune(buf[i:]) {
					safe = i
				}
				break
			}
		}
	}
	if !utf8.Valid(buf[:safe]) {
		at := u.off
		for i := 0; i < safe; {
			r, size := utf8.DecodeRune(buf[i:safe])
			if r == utf8.RuneError && size == 1 {
				at += int64(i)
				break
			}
			i += size
		}
		return 0, errdefs.Field("", "the body is not valid UTF-8 at byte %d: JSON must be UTF-8; send binary data base64-encoded (content_base64)", at)
	}
	u.off += int64(safe)
	u.nc = copy(u.carry[:], buf[safe:])
	return n, err
}
