package shard

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestLabelPatch: the merge patch reads back as the resourceVersion
// condition and the labels it sets and removes, for plain strings and for
// strings JSON must escape.
func TestLabelPatch(t *testing.T) {
	type meta struct {
		ResourceVersion string             `json:"resourceVersion"`
		Labels          map[string]*string `json:"labels"`
	}
	for _, tc := range []struct{ rv, key, value, remove string }{
		{"123", ShardLabel("web"), "replica-0", DrainLabel("web")},
		{"9", DrainLabel("web"), "true", ""},
		{`7"`, `k\ey`, "ü\n\x00<>&", "r\"m"},
	} {
		body := labelPatch(tc.rv, tc.key, tc.value, tc.remove)
		var got struct {
			Metadata meta `json:"metadata"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("labelPatch%q = %s: %v", []string{tc.rv, tc.key, tc.value, tc.remove}, body, err)
		}
		want := meta{ResourceVersion: tc.rv, Labels: map[string]*string{tc.key: &tc.value}}
		if tc.remove != "" {
			want.Labels[tc.remove] = nil
		}
		if !reflect.DeepEqual(got.Metadata, want) {
			t.Errorf("labelPatch%q = %s, want %+v", []string{tc.rv, tc.key, tc.value, tc.remove}, body, want)
		}
	}
}
