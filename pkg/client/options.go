package client

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// DeleteOptions configure Delete and DeleteAllOf. The zero value deletes
// unconditionally with the type's default propagation and grace period.
type DeleteOptions struct {
	// UID, when set, is a precondition: the delete fails with a conflict
	// (apierrors.IsConflict) if the object on the server has another UID,
	// for example because it was deleted and recreated.
	UID types.UID
	// ResourceVersion, when set, is a precondition: the delete fails with
	// a conflict if the object changed since that version.
	ResourceVersion string
	// PropagationPolicy says what happens to the object's dependents:
	// metav1.DeletePropagationBackground, Foreground or Orphan. Empty
	// means the type's default.
	PropagationPolicy metav1.DeletionPropagation
	// GracePeriodSeconds, when set, overrides the type's grace period
	// (pods); 0 deletes immediately.
	GracePeriodSeconds *int64
}

func (o DeleteOptions) toMeta(dryRun bool) metav1.DeleteOptions {
	m := metav1.DeleteOptions{GracePeriodSeconds: o.GracePeriodSeconds}
	if o.UID != "" || o.ResourceVersion != "" {
		m.Preconditions = &metav1.Preconditions{}
		if o.UID != "" {
			m.Preconditions.UID = &o.UID
		}
		if o.ResourceVersion != "" {
			m.Preconditions.ResourceVersion = &o.ResourceVersion
		}
	}
	if o.PropagationPolicy != "" {
		m.PropagationPolicy = &o.PropagationPolicy
	}
	if dryRun {
		m.DryRun = []string{metav1.DryRunAll}
	}
	return m
}

// ListOptions select the objects of ListFromServer and DeleteAllOf. The
// zero value selects every object in every namespace.
type ListOptions struct {
	// Namespace limits the selection to one namespace; empty means all.
	Namespace string
	// LabelSelector and FieldSelector select by labels and fields; nil
	// selects everything.
	LabelSelector labels.Selector
	FieldSelector fields.Selector
	// Limit and Continue page a ListFromServer: at most Limit objects,
	// continuing from the Continue token of the previous page's list
	// metadata. 0 means no limit.
	Limit    int64
	Continue string
}

func (o ListOptions) toMeta() metav1.ListOptions {
	m := metav1.ListOptions{Limit: o.Limit, Continue: o.Continue}
	if o.LabelSelector != nil {
		m.LabelSelector = o.LabelSelector.String()
	}
	if o.FieldSelector != nil {
		m.FieldSelector = o.FieldSelector.String()
	}
	return m
}
