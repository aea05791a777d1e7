package httpkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/nsbox/nsbox/daemon/errdefs"
)

// maxPathDepth bounds the nesting surrogateReader keeps names for (a body
// of a million '[' costs no more than a shallow one); deeper levels are
// counted and named "…".
const maxPathDepth = 64

// maxKeyBytes bounds the bytes of one object key kept to name a path.
const maxKeyBytes = 256

// surrogateReader passes a JSON body through and fails at the first \u
// escape of a UTF-16 surrogate (U+D800–U+DFFF) that is not half of a
// high-low pair. encoding/json would otherwise turn it into U+FFFD
// silently, as it does bytes that are not UTF-8 (utf8Reader). It follows
// the body's structure as it goes, so that the error names the field.
type surrogateReader struct {
	r   io.Reader
	off int64 // the offset of the next byte to scan

	inStr bool
	esc   int   // 0 none; 1 after '\'; 2..5 reading the four hex digits of \u
	code  rune  // the \u escape being read
	escAt int64 // the offset of its '\'
	high  bool  // the last escape was a high surrogate: a low one must follow
	hiAt  int64 // the offset of that high surrogate's '\'

	stack []frame // the containers open at this point (up to maxPathDepth)
	depth int     // how many are open (may exceed len(stack))
	inKey bool    // the string being read is an object's key
	key   []byte  // its raw bytes so far (up to maxKeyBytes)
}

// frame is one open container: an object and the key whose value is being
// read, or an array and the index of the element being read.
type frame struct {
	obj     bool
	wantKey bool
	key     string
	idx     int
}

func (s *surrogateReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if serr := s.scan(p[:n]); serr != nil {
		return 0, serr
	}
	return n, err
}

// scan moves the state over b; it returns the error for a lone surrogate.
func (s *surrogateReader) scan(b []byte) error {
	base := s.off
	s.off += int64(len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !s.inStr {
			s.structure(c)
			continue
		}
		if s.high && s.esc == 0 && c != '\\' {
			return s.lone(s.hiAt)
		}
		switch {
		case s.esc == 1:
			s.keyByte(c)
			if c != 'u' {
				if s.high {
					return s.lone(s.hiAt)
				}
				s.esc = 0
				continue
			}
			s.esc, s.code = 2, 0
		case s.esc >= 2:
			s.keyByte(c)
			d, ok := hexDigit(c)
			if !ok { // malformed: encoding/json says so
				s.esc, s.high = 0, false
				continue
			}
			s.code = s.code<<4 | d
			if s.esc++; s.esc < 6 {
				continue
			}
			s.esc = 0
			if err := s.escape(); err != nil {
				return err
			}
		case c == '\\':
			s.keyByte(c)
			s.esc, s.escAt = 1, base+int64(i)
		case c == '"':
			s.endString()
		default: // skip to the next byte that matters
			j := bytes.IndexAny(b[i:], `"\`)
			if j < 0 {
				j = len(b) - i
			}
			s.keyBytes(b[i : i+j])
			i += j - 1
		}
	}
	return nil
}

// escape judges the \u escape just read.
func (s *surrogateReader) escape() error {
	low := s.code >= 0xDC00 && s.code <= 0xDFFF
	if s.high {
		s.high = false
		if low {
			return nil
		}
		return s.lone(s.hiAt)
	}
	switch {
	case low:
		return s.lone(s.escAt)
	case s.code >= 0xD800 && s.code <= 0xDBFF:
		s.high, s.hiAt = true, s.escAt
	}
	return nil
}

func (s *surrogateReader) lone(at int64) error {
	return errdefs.Field(s.path(), "a lone UTF-16 surrogate escape at byte %d: a \\uD800–\\uDFFF escape must be half of a high-low pair (JSON strings are Unicode text); send binary data base64-encoded (content_base64)", at)
}

// structure follows a byte outside strings.
func (s *surrogateReader) structure(c byte) {
	var top *frame
	if s.depth > 0 && s.depth <= len(s.stack) {
		top = &s.stack[s.depth-1]
	}
	switch c {
	case '"':
		s.inStr = true
		s.inKey = top != nil && top.obj && top.wantKey
		s.key = s.key[:0]
	case '{', '[':
		if s.depth < maxPathDepth {
			s.stack = append(s.stack[:s.depth], frame{obj: c == '{', wantKey: c == '{'})
		}
		s.depth++
	case '}', ']':
		if s.depth > 0 {
			s.depth--
		}
	case ',':
		if top != nil {
			top.wantKey = top.obj
			top.idx++
		}
	case ':':
		if top != nil {
			top.wantKey = false
		}
	}
}

func (s *surrogateReader) endString() {
	s.inStr, s.esc, s.high = false, 0, false
	if !s.inKey {
		return
	}
	s.inKey = false
	if s.depth > 0 && s.depth <= len(s.stack) {
		s.stack[s.depth-1].key = keyText(s.key)
	}
}

func (s *surrogateReader) keyByte(c byte) {
	if s.inKey && len(s.key) < maxKeyBytes {
		s.key = append(s.key, c)
	}
}

func (s *surrogateReader) keyBytes(b []byte) {
	if s.inKey {
		s.key = append(s.key, b[:min(len(b), maxKeyBytes-len(s.key))]...)
	}
}

// keyText decodes a key's raw bytes (an escape cut by maxKeyBytes is dropped).
func keyText(raw []byte) string {
	var k string
	for cut := len(raw); cut >= 0 && cut >= len(raw)-6; cut-- {
		if json.Unmarshal(append(append([]byte{'"'}, raw[:cut]...), '"'), &k) == nil {
			return k
		}
	}
	return string(raw)
}

// path names the value being read, as the decoder's errors do:
// "files[2].content"; "" at the top level.
func (s *surrogateReader) path() string {
	var sb strings.Builder
	for i, f := range s.stack[:min(s.depth, len(s.stack))] {
		last := i == s.depth-1
		switch {
		case !f.obj:
			fmt.Fprintf(&sb, "[%d]", f.idx)
		case last && s.inKey: // the key itself holds the escape
			sb.WriteString(dot(sb.Len()) + keyText(s.key))
		case !f.wantKey:
			sb.WriteString(dot(sb.Len()) + f.key)
		}
	}
	if s.depth > len(s.stack) {
		sb.WriteString("…")
	}
	return sb.String()
}

func dot(n int) string {
	if n == 0 {
		return ""
	}
	return "."
}

func hexDigit(c byte) (rune, bool) {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0'), true
	case 'a' <= c && c <= 'f':
		return rune(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return rune(c-'A') + 10, true
	}
	return 0, false
}
