package server

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/httpkit"
)

// eventWriter writes a run's NDJSON stream, one flushed line per event,
// each within the server's write deadline (httpkit.WriteAll): a client that
// stops reading is treated as gone, and its run is cancelled. The engine's
// stdout and stderr copiers call it concurrently.
type eventWriter struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	timeout time.Duration // httpkit.Limits.WriteTimeout
	cancel  func()        // cancels the run when the client is gone
	failed  bool
	carry   map[string][]byte // per stream: an incomplete UTF-8 sequence held back
}

func newEventWriter(w http.ResponseWriter, timeout time.Duration, cancel func()) *eventWriter {
	w.Header().Set("Content-Type", agentapi.ContentTypeNDJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	return &eventWriter{
		w:       w,
		timeout: timeout,
		cancel:  cancel,
		carry:   map[string][]byte{},
	}
}

func (e *eventWriter) emit(ev agentapi.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.emitLocked(ev)
}

// line emits any value as one NDJSON line (a batch's items).
func (e *eventWriter) line(v any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.emitLocked(v)
}

func (e *eventWriter) emitLocked(ev any) {
	if e.failed {
		return
	}
	var err error
	if d := bigJSON(ev); d != nil {
		err = httpkit.WriteFrom(e.w, e.timeout, d.Len()+1, newlineAfter{d})
	} else {
		var b []byte
		if b, err = json.Marshal(ev); err == nil {
			err = httpkit.WriteAll(e.w, e.timeout, append(b, '\n'))
		}
	}
	if err != nil {
		e.failed = true
		e.cancel()
	}
}

// chunk emits p as a stdout/stderr event, holding back a trailing
// incomplete UTF-8 sequence so characters are never split across events.
func (e *eventWriter) chunk(typ string, p []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	data := append(e.carry[typ], p...)
	cut := len(data)
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				cut = i
			}
			break
		}
	}
	e.carry[typ] = append([]byte(nil), data[cut:]...)
	if cut > 0 {
		e.emitLocked(dataEvent(typ, data[:cut]))
	}
}

func dataEvent(typ string, b []byte) agentapi.Event {
	if utf8.Valid(b) {
		return agentapi.Event{Type: typ, Data: string(b)}
	}
	return agentapi.Event{Type: typ, DataBase64: base64.StdEncoding.EncodeToString(b)}
}

// finish emits what is held back of incomplete sequences.
func (e *eventWriter) finish() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, typ := range []string{agentapi.EventStdout, agentapi.EventStderr} {
		if b := e.carry[typ]; len(b) > 0 {
			e.emitLocked(dataEvent(typ, b))
			e.carry[typ] = nil
		}
	}
}
