package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// checkBounds is middleware that answers a tools/call whose number
// arguments fall outside their schema's minimum or maximum with a tool
// error naming the argument, the bound and its unit. The SDK's validator,
// which would answer otherwise, says "maximum: 10000/1 is greater than
// 600.000000".
func (s *Server) checkBounds(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
	return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
		if p, ok := req.GetParams().(*mcpsdk.CallToolParamsRaw); ok && method == "tools/call" {
			if err := outOfBounds(s.schemas[p.Name], p.Arguments); err != nil {
				res := &mcpsdk.CallToolResult{}
				res.SetError(err)
				return res, nil
			}
		}
		return next(ctx, method, req)
	}
}

// outOfBounds checks the number arguments in args against schema's
// bounds. Anything else (malformed arguments, a missing schema) is left
// to the SDK's validation.
func outOfBounds(schema *jsonschema.Schema, args json.RawMessage) error {
	if schema == nil || len(args) == 0 {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(schema.Properties)) {
		p := schema.Properties[name]
		n, ok := m[name].(float64)
		if !ok {
			continue
		}
		unit := ""
		if strings.HasSuffix(name, "_s") {
			unit = " s"
		}
		switch {
		case p.Minimum != nil && n < *p.Minimum:
			return fmt.Errorf("%s is %s, below its minimum of %s%s", name, num(n), num(*p.Minimum), unit)
		case p.Maximum != nil && n > *p.Maximum:
			return fmt.Errorf("%s is %s, above its maximum of %s%s: pass at most %[3]s", name, num(n), num(*p.Maximum), unit)
		}
	}
	return nil
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
