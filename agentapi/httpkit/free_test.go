package httpkit

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBigBodyHeapReturned: a handler that decodes a 32 MiB body, gives
// its reservation back in a defer and marshals what it decoded (as E2B's
// handlers do, and as a code cell is marshalled for its runner) leaves
// nothing in the heap once it has returned. The hand-back ran inside the
// handler before, with the body still reachable and encoding/json's pool
// holding the marshalled copy through the one collection: both stayed
// in the heap of a process that allocated too little to collect again.
func TestBigBodyHeapReturned(t *testing.T) {
	const size = 32 << 20
	b := NewBodies(Limits{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v struct{ S string }
		release, err := b.Decode(w, r, &v, Lenience{})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer release()
		out, err := json.Marshal(v)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("X-Marshalled", strconv.Itoa(len(out)))
	}))
	defer ts.Close()
	resp, err := http.Post(ts.URL, "application/json", strings.NewReader(`{"S":"`+strings.Repeat("x", size)+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// The hand-back follows the handler's return on a goroutine of its
	// own; the deadline only ends a heap that is never given back.
	var ms runtime.MemStats
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse < size/2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d MiB of heap in use 10 s after a %d MiB body was answered, want under %d MiB", ms.HeapInuse>>20, size>>20, size>>21)
		}
	}
}
