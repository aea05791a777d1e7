package httpkit

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"
	"unicode/utf8"
)

// BigJSONAfter is the size of a value's large strings past which WriteBigJSON
// writes it piecewise instead of through one json.Marshal: encoding a
// 2 × 64 MiB run result whole took three times its size again (the
// encoder's growing buffer, its copy, the newline appended), 529 MiB of
// RSS for one answer.
const BigJSONAfter = 1 << 20

// jsonChunk is how much of a large string is escaped at a time.
const jsonChunk = 64 << 10

// BigJSON is a JSON document whose large strings are escaped as it is
// written, never held encoded: the encoding of a value with those strings
// swapped for placeholders, cut at the placeholders. Its bytes are the
// same as json.Marshal's of the original value.
type BigJSON struct {
	parts [][]byte // the encoding between the large strings
	strs  []string
	n     int64
}

// NewBigJSON encodes v as json.Marshal would, but with the strings
// strs point to (fields of v, or of what v points to) written piecewise
// by WriteTo. The strings are swapped for placeholders while v is
// encoded and put back before NewBigJSON returns: v must not be used
// concurrently. A nil pointer in strs, or one to "", is skipped.
func NewBigJSON(v any, strs ...*string) (*BigJSON, error) {
	var nonce [12]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, err
	}
	var (
		saved []string
		ptrs  []*string
		marks []string
	)
	for i, p := range strs {
		if p == nil || *p == "" { // "" may be omitempty: it stays as it is
			continue
		}
		// Printable ASCII, which encoding/json writes as it is; the nonce
		// makes it one no value holds by chance.
		mark := fmt.Sprintf("nsbox-bigjson-%s-%d", hex.EncodeToString(nonce[:]), i)
		saved, ptrs, marks = append(saved, *p), append(ptrs, p), append(marks, mark)
		*p = mark
	}
	b, err := json.Marshal(v)
	for i, p := range ptrs {
		*p = saved[i]
	}
	if err != nil {
		return nil, err
	}
	// The placeholders in the order the encoding holds them, which is
	// the fields' and not necessarily strs's.
	type cut struct {
		at  int
		str int
	}
	cuts := make([]cut, len(marks))
	for i, mark := range marks {
		q := []byte(`"` + mark + `"`)
		k := bytes.Index(b, q)
		if k < 0 || bytes.Contains(b[k+len(q):], q) {
			return nil, errors.New("httpkit: a large string's placeholder is not in the encoding once")
		}
		cuts[i] = cut{k, i}
	}
	slices.SortFunc(cuts, func(a, b cut) int { return a.at - b.at })
	d := &BigJSON{}
	rest, off := b, 0
	for _, c := range cuts {
		d.parts = append(d.parts, rest[:c.at-off])
		d.strs = append(d.strs, saved[c.str])
		n := c.at - off + len(marks[c.str]) + 2
		rest, off = rest[n:], off+n
	}
	d.parts = append(d.parts, rest)
	for _, p := range d.parts {
		d.n += int64(len(p))
	}
	for _, s := range d.strs {
		n, _ := WriteJSONString(io.Discard, s)
		d.n += n
	}
	return d, nil
}

// Len is the length of the encoding.
func (d *BigJSON) Len() int64 { return d.n }

// WriteTo writes the encoding to w.
func (d *BigJSON) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for i, p := range d.parts {
		k, err := w.Write(p)
		n += int64(k)
		if err != nil {
			return n, err
		}
		if i < len(d.strs) {
			k, err := WriteJSONString(w, d.strs[i])
			n += k
			if err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// WriteJSONString writes s as encoding/json encodes a string (quoted,
// with HTML characters, U+2028 and U+2029 escaped and invalid UTF-8 as
// U+FFFD), jsonChunk bytes of s at a time: the memory it takes is a
// chunk's, whatever the size of s.
func WriteJSONString(w io.Writer, s string) (int64, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	var n int64
	write := func(b []byte) error {
		k, err := w.Write(b)
		n += int64(k)
		return err
	}
	if err := write([]byte{'"'}); err != nil {
		return n, err
	}
	for len(s) > 0 {
		end := min(len(s), jsonChunk)
		if end < len(s) {
			// Cut before a rune's first byte, never inside a rune: a
			// sequence cut in two would be escaped as two U+FFFD.
			// Continuation bytes with no first byte within UTFMax of
			// the cut are invalid whichever side they fall on.
			for j := end; j > end-utf8.UTFMax && j > 0; j-- {
				if utf8.RuneStart(s[j]) {
					end = j
					break
				}
			}
		}
		buf.Reset()
		if err := enc.Encode(s[:end]); err != nil {
			return n, err
		}
		b := buf.Bytes()
		if err := write(b[1 : len(b)-2]); err != nil { // no quotes, no newline
			return n, err
		}
		s = s[end:]
	}
	return n, write([]byte{'"'})
}

// WriteFrom writes an answer of n bytes from src to w and flushes it
// within WriteDeadline(timeout, n), as WriteAll does for one in memory.
func WriteFrom(w http.ResponseWriter, timeout time.Duration, n int64, src io.WriterTo) error {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(WriteDeadline(timeout, int(n)))
	_, err := src.WriteTo(w)
	if err == nil {
		err = rc.Flush()
	}
	_ = rc.SetWriteDeadline(time.Time{})
	return err
}
