package server

import (
	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/httpkit"
)

// bigJSON returns v's encoding to be written piecewise when v is, or
// carries, a run result whose outputs, files and figures pass
// httpkit.BigJSONAfter; nil for anything else, which is marshalled whole.
// A 2 × 64 MiB result marshalled whole took three times its size again
// while it was answered (four such clients: 1.29 GiB of RSS).
func bigJSON(v any) *httpkit.BigJSON {
	var res **agentapi.RunResult
	switch x := v.(type) {
	case *agentapi.RunResult:
		res = &x
	case agentapi.Event:
		res, v = &x.Result, &x
	case agentapi.BatchItem:
		res, v = &x.Result, &x
	default:
		return nil
	}
	if *res == nil {
		return nil
	}
	// A copy, so that the placeholders never show in the caller's result.
	r := **res
	*res = &r
	r.Files = append([]agentapi.FileResult(nil), r.Files...)
	r.Figures = append([]agentapi.Figure(nil), r.Figures...)
	strs := bigStrings(&r)
	if resultSize(&r) < httpkit.BigJSONAfter {
		return nil
	}
	if _, ok := v.(*agentapi.RunResult); ok {
		v = &r
	}
	d, err := httpkit.NewBigJSON(v, strs...)
	if err != nil {
		return nil
	}
	return d
}

// bigStrings points to the strings of r that can be large: outputs,
// files, figures, the value.
func bigStrings(r *agentapi.RunResult) []*string {
	strs := []*string{&r.Stdout, &r.Stderr, &r.StdoutBase64, &r.StderrBase64, &r.Value}
	for i := range r.Files {
		strs = append(strs, &r.Files[i].ContentBase64)
	}
	for i := range r.Figures {
		strs = append(strs, &r.Figures[i].DataBase64)
	}
	return strs
}

// resultSize is the bytes of r's large strings.
func resultSize(r *agentapi.RunResult) int {
	n := 0
	for _, s := range bigStrings(r) {
		n += len(*s)
	}
	return n
}
