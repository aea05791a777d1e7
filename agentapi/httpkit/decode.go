package httpkit

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
)

// ErrMediaType: the body is not JSON (of the class
// errdefs.ErrInvalidArgument, as ErrBodyTimeout).
var ErrMediaType = errdefs.New(errdefs.ErrInvalidArgument, "the request body must be application/json")

// contentTypeJSON is the one media type Decode accepts (agentapi's).
const contentTypeJSON = "application/json"

// Lenience relaxes the decoder for clients whose requests nsbox does not
// define (the E2B SDKs). The zero value is the strict decoder of /v1.
type Lenience struct {
	// UnknownFields accepts (and drops) fields v has no place for.
	UnknownFields bool
	// Empty accepts an empty body, leaving v as it is.
	Empty bool
	// AnyMediaType accepts a body whatever its Content-Type says.
	AnyMediaType bool
}

// Decode reads exactly one JSON value of a request body into v: the body
// must say it is JSON (or say nothing), stay within MaxBodyBytes, arrive
// within BodyTimeout, and hold no unknown field and no trailing data (l
// relaxes some of these). Every error names the field or the byte offset.
// The caller calls release once it is done with v (its bytes count
// against the budget till then).
func (b *Bodies) Decode(w http.ResponseWriter, r *http.Request, v any, l Lenience) (release func(), _ error) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !l.AnyMediaType {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != contentTypeJSON {
			return nil, fmt.Errorf("content type %q: %w", ct, ErrMediaType)
		}
	}
	body, release, err := b.Hold(w, r)
	if err != nil {
		return nil, err
	}
	if err := l.Decode(body, v); err != nil {
		release()
		return nil, BodyError(w, err)
	}
	return release, nil
}

// Decode is the strict decoder: Lenience{}.Decode.
func Decode(r io.Reader, v any) error { return Lenience{}.Decode(r, v) }

// Decode reads exactly one JSON value from r into v. Unknown fields
// (unless l.UnknownFields), wrong types, trailing data, bytes that are not
// UTF-8, lone surrogate escapes ("\ud800") and malformed JSON are *errdefs.FieldErrors whose message names
// the field or the offset; an oversize body (r wrapped by
// http.MaxBytesReader) is returned as *http.MaxBytesError.
func (l Lenience) Decode(r io.Reader, v any) error {
	var body capture
	var src io.Reader = &surrogateReader{r: &utf8Reader{r: r}}
	if !l.UnknownFields {
		src = io.TeeReader(src, &body)
	}
	dec := json.NewDecoder(src)
	if !l.UnknownFields {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		if l.Empty && errors.Is(err, io.EOF) {
			return nil
		}
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
		return errdefs.Field("", "malformed JSON: trailing data after the request object")
	}
	return nil
}

func decodeError(err error) error {
	var (
		se  *json.SyntaxError
		te  *json.UnmarshalTypeError
		mbe *http.MaxBytesError
		fe  *errdefs.FieldError
	)
	switch {
	case errors.As(err, &fe):
		return fe
	case errors.As(err, &mbe):
		return err // 413 in the servers' error tables
	case errors.As(err, &se):
		return errdefs.Field("", "malformed JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "(request)"
		}
		return errdefs.Field(field, "expected %s, got JSON %s", te.Type, te.Value)
	case errors.Is(err, io.EOF):
		return errdefs.Field("", "empty request body: expected a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errdefs.Field("", "malformed JSON: unexpected end of body")
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return errdefs.Field(strings.Trim(name, `"`), "unknown field")
	}
	return fmt.Errorf("decoding request: %w", err)
}
