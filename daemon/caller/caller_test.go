package caller

import (
	"context"
	"slices"
	"testing"
)

func TestMayUse(t *testing.T) {
	as := func(uid uint32, groups ...uint32) context.Context {
		return With(context.Background(), Caller{UID: uid, Groups: groups})
	}
	staff := uint32(50)
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		owner int64
		admin *uint32
		want  bool
	}{
		{"owner", as(1000, 1000), 1000, nil, true},
		{"another uid's", as(1001, 1001), 1000, nil, false},
		{"root", as(0, 0), 1000, nil, true},
		{"admin group member", as(1001, 1001, staff), 1000, &staff, true},
		{"admin group, not a member", as(1001, 1001), 1000, &staff, false},
		{"admin group not configured", as(1001, 1001, staff), 1000, nil, false},
		{"in-process caller", context.Background(), 1000, nil, true},
		{"unowned", as(1001), -1, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MayUse(tc.ctx, tc.owner, tc.admin); got != tc.want {
				t.Errorf("MayUse = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOwnerAndAttrs(t *testing.T) {
	ctx := With(context.Background(), Caller{UID: 1000})
	if got := Owner(ctx); got != 1000 {
		t.Errorf("Owner = %d, want 1000", got)
	}
	if got := Attrs(ctx); !slices.Equal(got, []any{"uid", uint32(1000)}) {
		t.Errorf("Attrs = %v, want [uid 1000]", got)
	}
	if got := Owner(context.Background()); got != -1 {
		t.Errorf("in-process Owner = %d, want -1", got)
	}
	if got := Attrs(context.Background()); got != nil {
		t.Errorf("in-process Attrs = %v, want none", got)
	}
}
