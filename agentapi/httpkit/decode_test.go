package httpkit

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/nsbox/nsbox/daemon/admission"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

type inner struct {
	B int `json:"b"`
}

type sample struct {
	A     string `json:"a"`
	Inner inner  `json:"inner"`
}

func TestLenience(t *testing.T) {
	strict, e2b := Lenience{}, Lenience{UnknownFields: true, Empty: true, AnyMediaType: true}
	for _, tc := range []struct {
		name, body string
		l          Lenience
		field      string // the field the error names; "-" for no error
		want       sample
	}{
		{"strict: known fields", `{"a":"x","inner":{"b":2}}`, strict, "-", sample{A: "x", Inner: inner{B: 2}}},
		{"strict: an unknown field is named with its path", `{"a":"x","inner":{"c":2}}`, strict, "inner.c", sample{}},
		{"strict: empty body", ``, strict, "", sample{}},
		{"lenient: an unknown field is dropped", `{"a":"x","inner":{"c":2},"secure":true}`, e2b, "-", sample{A: "x"}},
		{"lenient: empty body leaves v", ``, e2b, "-", sample{}},
		{"lenient: trailing data refused", `{"a":"x"} {}`, e2b, "", sample{}},
		{"lenient: a wrong type refused", `{"a":1}`, e2b, "a", sample{}},
		{"lenient: not UTF-8 refused", "{\"a\":\"\xff\"}", e2b, "", sample{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got sample
			err := tc.l.Decode(strings.NewReader(tc.body), &got)
			if tc.field == "-" {
				if err != nil || got != tc.want {
					t.Fatalf("Decode: %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			var fe *errdefs.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("Decode: %v, want a FieldError naming %q", err, tc.field)
			}
		})
	}
}

func TestMediaType(t *testing.T) {
	b := NewBodies(Limits{})
	for _, tc := range []struct {
		ctype string
		l     Lenience
		ok    bool
	}{
		{"application/json", Lenience{}, true},
		{"application/json; charset=utf-8", Lenience{}, true},
		{"", Lenience{}, true},
		{"text/plain", Lenience{}, false},
		{"text/plain", Lenience{AnyMediaType: true}, true},
	} {
		r := httptest.NewRequest("POST", "/", strings.NewReader(`{"a":"x"}`))
		r.Header.Set("Content-Type", tc.ctype)
		var v sample
		release, err := b.Decode(httptest.NewRecorder(), r, &v, tc.l)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrMediaType)) {
			t.Errorf("Content-Type %q (%+v): %v, want ok=%v", tc.ctype, tc.l, err, tc.ok)
		}
		if release != nil {
			release()
		}
	}
	if b.InUse() != 0 {
		t.Errorf("%d bytes still reserved after every release", b.InUse())
	}
}

func TestHoldBudget(t *testing.T) {
	b := NewBodies(Limits{MaxBodyBytes: 100, MaxBodyBytesInFlight: 150})
	req := func(n int) *http.Request {
		return httptest.NewRequest("POST", "/", strings.NewReader(strings.Repeat("x", n)))
	}
	var mbe *http.MaxBytesError
	if _, _, err := b.Hold(httptest.NewRecorder(), req(101)); !errors.As(err, &mbe) {
		t.Fatalf("a declared 101 bytes over a 100-byte cap: %v, want a MaxBytesError", err)
	}
	_, first, err := b.Hold(httptest.NewRecorder(), req(100))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Hold(httptest.NewRecorder(), req(100)); !errors.Is(err, errdefs.ErrExhausted) {
		t.Fatalf("a second 100 bytes beside 100 in a 150 budget: %v, want ErrExhausted", err)
	}
	_, second, err := b.Hold(httptest.NewRecorder(), req(50))
	if err != nil {
		t.Fatalf("50 bytes beside 100 in a 150 budget: %v", err)
	}
	first()
	first() // a second release gives nothing back twice
	second()
	if b.InUse() != 0 {
		t.Fatalf("%d bytes reserved after the releases", b.InUse())
	}
}

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		status int
		err    error
		want   string
	}{
		{http.StatusTooManyRequests, errdefs.New(errdefs.ErrExhausted, "full"), "1"},
		{http.StatusTooManyRequests, &admission.BusyError{RetryAfter: 7 * time.Second}, "7"},
		{http.StatusServiceUnavailable, errdefs.New(errdefs.ErrUnavailable, "closing"), "1"},
		{http.StatusBadRequest, errdefs.Field("a", "bad"), ""},
	} {
		w := httptest.NewRecorder()
		RetryAfter(w, tc.status, tc.err)
		if got := w.Header().Get("Retry-After"); got != tc.want {
			t.Errorf("%d %v: Retry-After %q, want %q", tc.status, tc.err, got, tc.want)
		}
	}
}

func TestLimitsServer(t *testing.T) {
	hs := Limits{}.Server(http.NotFoundHandler(), t.Context(), nil)
	if hs.MaxHeaderBytes != DefaultMaxHeaderBytes || hs.ReadHeaderTimeout != DefaultReadHeaderTimeout || hs.IdleTimeout != DefaultIdleTimeout {
		t.Fatalf("server limits: headers %d, read header %s, idle %s", hs.MaxHeaderBytes, hs.ReadHeaderTimeout, hs.IdleTimeout)
	}
}

// chunked is a request with no Content-Length, as the E2B JS SDK sends.
func chunked(body string) *http.Request {
	r := httptest.NewRequest("POST", "/", strings.NewReader(body))
	r.ContentLength = -1
	return r
}

func TestHoldChunked(t *testing.T) {
	b := NewBodies(Limits{MaxBodyBytes: 100, MaxBodyBytesInFlight: 150})
	// A small chunked body reserves what it sent, not the cap: many fit.
	var releases []func()
	for i := range 10 {
		body, release, err := b.Hold(httptest.NewRecorder(), chunked(`{"a":"x"}`))
		if err != nil {
			t.Fatalf("small chunked body %d: %v", i, err)
		}
		if _, err := io.ReadAll(body); err != nil {
			t.Fatalf("small chunked body %d: %v", i, err)
		}
		releases = append(releases, release)
	}
	if got := b.InUse(); got != 90 {
		t.Fatalf("10 chunked bodies of 9 bytes reserve %d, want 90", got)
	}
	// One that does not fit beside them is refused as it is read.
	w := httptest.NewRecorder()
	body, release, err := b.Hold(w, chunked(strings.Repeat("x", 100)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(body); !errors.Is(err, errdefs.ErrExhausted) || w.Header().Get("Connection") != "close" {
		t.Fatalf("a chunked body past the budget: %v (Connection %q), want ErrExhausted and the connection closed", err, w.Header().Get("Connection"))
	}
	release()
	for _, r := range releases {
		r()
	}
	// Alone, a chunked body of the cap fits even when the budget is
	// smaller than the cap, as a declared one does.
	small := NewBodies(Limits{MaxBodyBytes: 100, MaxBodyBytesInFlight: 10})
	body, release, err = small.Hold(httptest.NewRecorder(), chunked(strings.Repeat("x", 100)))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, iotest.OneByteReader(body)); err != nil || n != 100 {
		t.Fatalf("a lone chunked body of the cap: %d bytes, %v", n, err)
	}
	release()
	if b.InUse() != 0 || small.InUse() != 0 {
		t.Fatalf("reserved after every release: %d, %d", b.InUse(), small.InUse())
	}
}
