package objects

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The conditions helpers are apimachinery's (k8s.io/apimachinery/pkg/api/meta),
// here so an operator finds what it does to its objects in one package.

// SetCondition puts c into conds, replacing the condition of the same type,
// and reports whether conds changed. LastTransitionTime changes only when
// the status does: to c.LastTransitionTime if set, else to now. Setting the
// same condition twice changes nothing, so a status write can be skipped.
func SetCondition(conds *[]metav1.Condition, c metav1.Condition) bool {
	return meta.SetStatusCondition(conds, c)
}

// FindCondition returns the condition of type condType in conds, or nil.
// The result points into conds.
func FindCondition(conds []metav1.Condition, condType string) *metav1.Condition {
	return meta.FindStatusCondition(conds, condType)
}

// IsConditionTrue reports whether conds holds a condition of type condType
// with status True.
func IsConditionTrue(conds []metav1.Condition, condType string) bool {
	return meta.IsStatusConditionTrue(conds, condType)
}
