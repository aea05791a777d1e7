package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/nsbox/nsbox/agentapi"
)

// DecodeRunRequest reads exactly one JSON RunRequest from r. Unknown fields,
// wrong types, trailing data and malformed JSON are *FieldErrors whose
// message names the field or the offset; an oversize body (r wrapped by
// http.MaxBytesReader) is returned as *http.MaxBytesError.
func DecodeRunRequest(r io.Reader) (*agentapi.RunRequest, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var req agentapi.RunRequest
	if err := dec.Decode(&req); err != nil {
		return nil, decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, decodeError(err)
		}
		return nil, fieldErr("", "malformed JSON: trailing data after the request object")
	}
	return &req, nil
}

func decodeError(err error) error {
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
	)
	var mbe *http.MaxBytesError
	switch {
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
