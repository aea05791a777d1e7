package httpkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// maxPathCapture bounds the copy of a body kept to name the path of an
// unknown field (encoding/json names the field alone): bodies past it get
// the bare name.
const maxPathCapture = 1 << 20

// capture keeps the first maxPathCapture bytes written to it.
type capture struct{ bytes.Buffer }

func (c *capture) Write(p []byte) (int, error) {
	if room := maxPathCapture - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *capture) complete() bool { return c.Len() < maxPathCapture }

// unknownPath finds, in the JSON body, the path of a key that t (the type
// decoded into) has no field for, such as "limits.timeoutms" or
// "files[0].txt"; "" when it finds none.
func unknownPath(body []byte, t reflect.Type) string {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	return walkUnknown(v, t, "")
}

func walkUnknown(v any, t reflect.Type, path string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch v := v.(type) {
	case map[string]any:
		if t.Kind() == reflect.Map {
			for _, k := range slices.Sorted(maps.Keys(v)) {
				if p := walkUnknown(v[k], t.Elem(), join(k)); p != "" {
					return p
				}
			}
			return ""
		}
		if t.Kind() != reflect.Struct {
			return ""
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			f, ok := jsonField(t, k)
			if !ok {
				return join(k)
			}
			if p := walkUnknown(v[k], f.Type, join(k)); p != "" {
				return p
			}
		}
	case []any:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return ""
		}
		for i, e := range v {
			if p := walkUnknown(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	}
	return ""
}

// jsonField finds the field of struct t that key decodes into, as
// encoding/json matches them (the tag's name, else the Go name; any case).
func jsonField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if strings.EqualFold(name, key) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
