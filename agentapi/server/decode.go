package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/nsbox/nsbox/daemon/errdefs"

	"github.com/nsbox/nsbox/agentapi"
)

var fieldErr = errdefs.Field

// decode reads exactly one JSON value of a request body into v: the body
// must say it is JSON (or say nothing), stay within MaxBodyBytes, arrive
// within BodyTimeout, and hold no unknown field and no trailing data. Every
// error names the field or the byte offset. The caller calls release once
// it is done with v (its bytes count against the body budget till then).
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) (release func(), _ error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != agentapi.ContentTypeJSON {
			return nil, fmt.Errorf("content type %q: %w", ct, ErrMediaType)
		}
	}
	body, release, err := s.body(w, r)
	if err != nil {
		return nil, err
	}
	if err := Decode(body, v); err != nil {
		release()
		return nil, bodyError(w, err)
	}
	return release, nil
}

// Decode reads exactly one JSON value from r into v. Unknown fields, wrong
// types, trailing data and malformed JSON are *errdefs.FieldErrors whose
// message names the field or the offset; an oversize body (r wrapped by
// http.MaxBytesReader) is returned as *http.MaxBytesError.
func Decode(r io.Reader, v any) error {
	var body capture
	dec := json.NewDecoder(io.TeeReader(&utf8Reader{r: r}, &body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		err = decodeError(err)
		// encoding/json names an unknown field without its path: find it.
		if fe, ok := err.(*errdefs.FieldError); ok && fe.Msg == "unknown field" && body.complete() {
			if p := unknownPath(body.Bytes(), reflect.TypeOf(v)); p != "" {
				fe.Field = p
			}
		}
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			return decodeError(err)
		}
		return fieldErr("", "malformed JSON: trailing data after the request object")
	}
	return nil
}

func decodeError(err error) error {
	var (
		se  *json.SyntaxError
		te  *json.UnmarshalTypeError
		mbe *http.MaxBytesError
	)
	var fe *errdefs.FieldError
	switch {
	case errors.As(err, &fe):
		return fe
	case errors.As(err, &mbe):
		return err // translated to 413 by writeError
	case errors.As(err, &se):
		return fieldErr("", "malformed JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "(request)"
		}
		return fieldErr(field, "expected %s, got JSON %s", te.Type, te.Value)
	case errors.Is(err, io.EOF):
		return fieldErr("", "empty request body: expected a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fieldErr("", "malformed JSON: unexpected end of body")
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fieldErr(strings.Trim(name, `"`), "unknown field")
	}
	return fmt.Errorf("decoding request: %w", err)
}
