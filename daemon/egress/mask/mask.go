// Package mask finds an egress secret's value in the forms a server
// plausibly echoes it in (as is, hex, percent-encoded, base64 at three
// alignments, JSON-escaped; any Run bytes in a row of one) and overwrites
// each matched byte with '*', in strings, headers, responses and streams,
// holding back no more than Run-1 bytes of a stream (docs/NETWORK.md, "A
// secret's own host echoing it").
package mask

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf16"
)

// Run is the bound of the masking: any Run bytes in a row of one
// of a secret's forms, in any letter case, are masked wherever they appear
// in an answer, so a value cut in two (two headers, two JSON fields) is
// masked as long as each part is. A form shorter than this is masked
// whole. Eight random bytes of a token are as good as never met by chance.
const Run = 8

// minShort is the shortest form other than the value itself that is
// masked whole: a base64 or hex form of two bytes would mask at random.
const minShort = 4

// A Masker finds a set of secrets in the forms a server plausibly echoes
// them in (see forms) and overwrites every byte of a match with '*', so
// lengths (and Content-Length) stay what the upstream said.
type Masker struct {
	grams map[uint64]struct{} // every Run-byte window of every form, lower case
	seen  [1 << 10]uint64     // a bit per hash of each gram: most windows stop here
	short [][]byte            // whole forms shorter than Run, lower case
}

// New is a Masker of values.
func New(values []string) *Masker {
	m := &Masker{grams: map[uint64]struct{}{}}
	for _, v := range values {
		for _, f := range forms(v) {
			f = strings.ToLower(f)
			if len(f) < Run {
				if len(f) >= minShort || f == strings.ToLower(v) {
					m.short = append(m.short, []byte(f))
				}
				continue
			}
			var key uint64
			for i := 0; i < len(f); i++ {
				key = key<<8 | uint64(f[i])
				if i >= Run-1 {
					m.grams[key] = struct{}{}
					h := gramHash(key)
					m.seen[h>>6] |= 1 << (h & 63)
				}
			}
		}
	}
	return m
}

// forms are v as it is (letter case is ignored when matching), hex,
// percent-encoded (query, path, every byte; '+' for a space), base64 in
// both alphabets at each of the three alignments v may have in an encoded
// stream (the characters that depend on v alone), and JSON string escapes
// (Go's, with and without HTML escapes, ASCII-only with \uXXXX, and with
// "\/"), deduplicated.
func forms(v string) []string {
	out := []string{v, hex.EncodeToString([]byte(v)), url.QueryEscape(v), url.PathEscape(v)}
	var all strings.Builder
	for i := 0; i < len(v); i++ {
		fmt.Fprintf(&all, "%%%02X", v[i])
	}
	out = append(out, all.String())
	for skip := 0; skip < 3 && skip < len(v); skip++ {
		b := []byte(v[skip:])
		b = b[:len(b)/3*3]
		out = append(out, base64.StdEncoding.EncodeToString(b), base64.URLEncoding.EncodeToString(b))
	}
	for _, html := range []bool{false, true} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(html)
		enc.Encode(v)
		j := strings.TrimSuffix(strings.TrimSpace(buf.String()), `"`)[1:]
		out = append(out, j, strings.ReplaceAll(j, "/", `\/`))
	}
	out = append(out, jsonASCII(v))
	seen := map[string]bool{}
	uniq := out[:0]
	for _, f := range out {
		if l := strings.ToLower(f); f != "" && !seen[l] {
			seen[l] = true
			uniq = append(uniq, f)
		}
	}
	return uniq
}

// jsonASCII is v JSON-escaped with every non-ASCII rune as \uXXXX (as
// Python's json.dumps writes it).
func jsonASCII(v string) string {
	var b strings.Builder
	for _, r := range v {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r > 0x7e:
			for _, u := range utf16.Encode([]rune{r}) {
				fmt.Fprintf(&b, `\u%04x`, u)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// gramHash is 16 bits of key, for the bitset in front of the map.
func gramHash(key uint64) uint64 { return key * 0x9e3779b97f4a7c15 >> 48 }

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// mark sets marks[i] for every byte of b inside a match that lies wholly
// in b. Marks already set stay set.
func (m *Masker) mark(b []byte, marks []bool) {
	var key uint64
	for i := range b {
		key = key<<8 | uint64(lower(b[i]))
		if h := gramHash(key); i >= Run-1 && m.seen[h>>6]&(1<<(h&63)) != 0 {
			if _, ok := m.grams[key]; ok {
				for j := i - Run + 1; j <= i; j++ {
					marks[j] = true
				}
			}
		}
		for _, p := range m.short {
			if s := i + 1 - len(p); s >= 0 && bytes.EqualFold(b[s:i+1], p) {
				for j := s; j <= i; j++ {
					marks[j] = true
				}
			}
		}
	}
}

// String is s masked.
func (m *Masker) String(s string) string {
	b := []byte(s)
	marks := make([]bool, len(b))
	m.mark(b, marks)
	if !applyMarks(b, marks) {
		return s
	}
	return string(b)
}

// applyMarks overwrites marked bytes with '*' and says whether any was.
func applyMarks(b []byte, marks []bool) bool {
	hit := false
	for i, on := range marks {
		if on {
			b[i], hit = '*', true
		}
	}
	return hit
}

// Header masks h's names and values in place ('*' is a token character,
// so a masked name is still a valid one).
func (m *Masker) Header(h http.Header) {
	for k, vs := range h {
		for i := range vs {
			vs[i] = m.String(vs[i])
		}
		if mk := m.String(k); mk != k {
			delete(h, k)
			h[mk] = append(h[mk], vs...)
		}
	}
}

// Response masks what of resp reaches the sandbox: the status line's
// reason phrase, header names and values, trailer names now and their
// values when the body ends, and the body as it streams.
func (m *Masker) Response(resp *http.Response) {
	resp.Status = m.String(resp.Status)
	m.Header(resp.Header)
	m.Header(resp.Trailer)
	if resp.Body != nil && resp.Body != http.NoBody {
		resp.Body = &maskReader{m: m, rc: resp.Body, onEOF: func() { m.Header(resp.Trailer) }}
	}
}

// maskReader masks a stream without holding it: it keeps back the last
// Run-1 bytes read, which a match may yet cover, and releases the rest.
type maskReader struct {
	m     *Masker
	rc    io.ReadCloser
	onEOF func() // after the upstream's trailers are in, before EOF is passed on
	chunk []byte
	held  []byte // read, not yet released
	marks []bool // of held
	buf   []byte // released and masked
	out   []byte // of buf, not yet read
	err   error
}

func (r *maskReader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.chunk == nil {
			r.chunk = make([]byte, 32<<10)
		}
		n, err := r.rc.Read(r.chunk)
		r.held = append(r.held, r.chunk[:n]...)
		r.marks = append(r.marks, make([]bool, n)...)
		r.m.mark(r.held, r.marks)
		release := len(r.held) - (Run - 1)
		if err != nil {
			r.err, release = err, len(r.held)
			if err == io.EOF && r.onEOF != nil {
				r.onEOF()
			}
		}
		if release <= 0 {
			continue
		}
		applyMarks(r.held[:release], r.marks[:release])
		r.buf = append(r.buf[:0], r.held[:release]...)
		r.out = r.buf
		r.held = append(r.held[:0], r.held[release:]...)
		r.marks = append(r.marks[:0], r.marks[release:]...)
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

func (r *maskReader) Close() error { return r.rc.Close() }

// Reader is rc masked as it streams.
func (m *Masker) Reader(rc io.ReadCloser) io.ReadCloser { return &maskReader{m: m, rc: rc} }
