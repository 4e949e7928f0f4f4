package shard

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// list calls fn with every labelled object of slot r, a page at a time:
// its item and what the sharder reads of it.
func (s *labelSharder) list(ctx context.Context, r int, fn func(item, snap)) error {
	sl := s.slots[r]
	rc := resourceClient(s.opts.Metadata, sl.res.Resource, sl.ns)
	cont := ""
	for {
		l, err := rc.List(ctx, metav1.ListOptions{LabelSelector: s.shardLabel, Limit: scanPage, Continue: cont})
		if err != nil {
			return fmt.Errorf("listing %s: %w", sl.res.Resource, err)
		}
		for i := range l.Items {
			m := &l.Items[i]
			fn(item{r: r, namespace: m.Namespace, name: m.Name}, s.snapOf(m))
		}
		if cont = l.Continue; cont == "" {
			return nil
		}
	}
}
