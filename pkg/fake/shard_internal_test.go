package fake

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/sharding"
)

// TestParseShardSelector holds the parser to kube-apiserver's rules
// (k8s.io/apiserver/pkg/sharding.Parse) and to its error messages where
// the same rule fails.
func TestParseShardSelector(t *testing.T) {
	const (
		zero = "'0x0000000000000000'"
		half = "'0x8000000000000000'"
		end  = "'0x10000000000000000'"
	)
	uid := func(start, end string) sharding.ShardRangeRequirement {
		return sharding.ShardRangeRequirement{Key: shardKeyUID, Start: strings.Trim(start, "'"), End: strings.Trim(end, "'")}
	}
	ok := []struct {
		in   string
		want []sharding.ShardRangeRequirement
	}{
		{"shardRange(object.metadata.uid, " + zero + ", " + half + ")", []sharding.ShardRangeRequirement{uid(zero, half)}},
		{"shardRange(object.metadata.uid, " + half + ", " + end + ")", []sharding.ShardRangeRequirement{uid(half, end)}},
		{"shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')",
			[]sharding.ShardRangeRequirement{{Key: shardKeyNamespace, Start: "0x00000000000000aa", End: "0x00000000000000ff"}}},
		{"shardRange(object.metadata.uid, " + zero + ", " + half + ") || shardRange(object.metadata.uid, " + half + ", " + end + ")",
			[]sharding.ShardRangeRequirement{uid(zero, half), uid(half, end)}},
		{"\n\tshardRange ( object . metadata . uid , \"0x0000000000000000\" , '0x8000000000000000' )||shardRange(object.metadata.uid," + half + "," + end + ") ",
			[]sharding.ShardRangeRequirement{uid(zero, half), uid(half, end)}},
	}
	for _, tc := range ok {
		t.Run(tc.in, func(t *testing.T) {
			sel, err := parseShardSelector(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := sel.Requirements(); !slices.Equal(got, tc.want) {
				t.Errorf("requirements %+v, want %+v", got, tc.want)
			}
		})
	}
	bad := []struct{ in, want string }{
		{"", "empty shard selector is not allowed"},
		{" \t\n", "empty shard selector is not allowed"},
		{"shardRange(object.metadata.name, " + zero + ", " + half + ")", `unsupported field path "object.metadata.name"`},
		{"shardRange(metadata.uid, " + zero + ", " + half + ")", `unsupported field path "metadata.uid"`},
		{"shardRange(object.metadata.uid, " + zero + ", " + half + ") || shardRange(object.metadata.namespace, " + zero + ", " + half + ")",
			`all shard ranges must use the same field, got "object.metadata.uid" and "object.metadata.namespace"`},
		{"hashRange(object.metadata.uid, " + zero + ", " + half + ")", `unsupported function "hashRange"`},
		{"shardRange(object.metadata.uid, '0x0', " + half + ")", `hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" (did you mean "0x0000000000000000"?)`},
		{"shardRange(object.metadata.uid, " + zero + ", '0x')", "hexEnd: hex value is required after '0x'"},
		{"shardRange(object.metadata.uid, " + zero + ", '8000000000000000')", `hexEnd must have '0x' prefix, got "8000000000000000"`},
		{"shardRange(object.metadata.uid, " + zero + ", '0x800000000000000A')", `hexEnd: invalid hex character "A"`},
		{"shardRange(object.metadata.uid, " + zero + ", '0x20000000000000000')", "hexEnd: 17-digit hex value must be '0x10000000000000000' (2^64)"},
		{"shardRange(object.metadata.uid, " + zero + ", '0x100000000000000000')", "hexEnd: hex value too long (18 chars, max 17)"},
		{"shardRange(object.metadata.uid, " + half + ", " + half + ")", "shard range start 0x8000000000000000 must be less than end 0x8000000000000000"},
		{"shardRange(object.metadata.uid, " + end + ", " + end + ")", "must be less than end"},
		{"shardRange(object.metadata.uid, " + zero + ", 0x8000000000000000)", "hexEnd must be a string literal"},
		{"shardRange(object.metadata.uid, " + zero + ", '0x8000000000000000)", "hexEnd: unterminated string"},
		{"shardRange(object.metadata.uid, " + zero + ", '''0x8000000000000000''')", "triple-quoted strings are not supported"},
		{"shardRange(object.metadata.uid, " + zero + ", '\\x30x8000000000000000')", "escape sequences"},
		{"shardRange(object.metadata.uid, " + zero + ")", `syntax error at offset 52: expected ",", found ')'`},
		{"shardRange(object.metadata.uid, " + zero + ", " + half + ", " + half + ")", `expected ")"`},
		{"(shardRange(object.metadata.uid, " + zero + ", " + half + "))", "expected an identifier"},
		{"shardRange(object.metadata.uid, " + zero + ", " + half + ") ||", "expected an identifier, found the end"},
		{"shardRange(object.metadata.uid, " + zero + ", " + half + ") && shardRange(object.metadata.uid, " + zero + ", " + half + ")", `expected "||"`},
		{"shardRange(object.metadata.uid, " + zero + ", " + half + ") // all", `expected "||"`},
		{strings.Repeat(" ", shardSelectorLimit+1), "expression code point size exceeds limit: size: 100001, limit 100000"},
	}
	for _, tc := range bad {
		t.Run(tc.in[:min(len(tc.in), 100)], func(t *testing.T) {
			sel, err := parseShardSelector(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("parsed to %v, %v; want an error with %q", sel, err, tc.want)
			}
		})
	}
}

// FuzzShardSelector: the parser never panics, and what it accepts is
// valid (a known field, one for all ranges, start below end) and
// renders, as kube-apiserver echoes it in shardInfo, to a selector that
// parses to the same requirements and renders the same.
func FuzzShardSelector(f *testing.F) {
	for _, s := range []string{
		"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
		"shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000') || shardRange(object.metadata.namespace, '0x0000000000000000', '0x0000000000000001')",
		" shardRange ( object . metadata . uid , \"0x00000000000000aa\" , '0x00000000000000ff' ) ",
		"shardRange(object.metadata.uid, '0x0', '0x8')",
		"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := parseShardSelector(s)
		if err != nil {
			return
		}
		reqs := sel.Requirements()
		if len(reqs) == 0 {
			t.Fatalf("%q: accepted with no requirement", s)
		}
		for _, r := range reqs {
			if r.Key != reqs[0].Key || (r.Key != shardKeyUID && r.Key != shardKeyNamespace) || !sharding.HexLess(r.Start, r.End) {
				t.Fatalf("%q: accepted the requirement %+v of %+v", s, r, reqs)
			}
		}
		echo := sel.String()
		again, err := parseShardSelector(echo)
		if err != nil {
			t.Fatalf("%q renders to %q, which does not parse: %v", s, echo, err)
		}
		if !slices.Equal(again.Requirements(), reqs) || again.String() != echo {
			t.Fatalf("%q renders to %q, which parses to %+v, want %+v", s, echo, again.Requirements(), reqs)
		}
	})
}
