package e2e

import (
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

// WidgetApplyConfiguration is an apply configuration of Widget, written by
// hand the way controller-gen's applyconfiguration generator writes one: a
// pointer for every field, each omitted when unset, so that a server-side
// apply sends, and owns, exactly the fields the caller set.
type WidgetApplyConfiguration struct {
	metav1ac.TypeMetaApplyConfiguration    `json:",inline"`
	*metav1ac.ObjectMetaApplyConfiguration `json:"metadata,omitempty"`
	Spec                                   *WidgetSpecApplyConfiguration   `json:"spec,omitempty"`
	Status                                 *WidgetStatusApplyConfiguration `json:"status,omitempty"`
}

// WidgetSpecApplyConfiguration is the apply configuration of WidgetSpec.
type WidgetSpecApplyConfiguration struct {
	Size  *int32  `json:"size,omitempty"`
	Color *string `json:"color,omitempty"`
}

// WidgetStatusApplyConfiguration is the apply configuration of
// WidgetStatus.
type WidgetStatusApplyConfiguration struct {
	ObservedSize *int32 `json:"observedSize,omitempty"`
}

// widgetAC returns the apply configuration of Widget namespace/name, with
// only its apiVersion, kind, name and namespace set.
func widgetAC(namespace, name string) *WidgetApplyConfiguration {
	b := &WidgetApplyConfiguration{}
	b.WithKind("Widget")
	b.WithAPIVersion(e2eGV.String())
	b.ensureObjectMeta()
	b.ObjectMetaApplyConfiguration.WithName(name).WithNamespace(namespace)
	return b
}

// IsApplyConfiguration marks WidgetApplyConfiguration as an apply
// configuration (runtime.ApplyConfiguration).
func (b WidgetApplyConfiguration) IsApplyConfiguration() {}

func (b *WidgetApplyConfiguration) ensureObjectMeta() {
	if b.ObjectMetaApplyConfiguration == nil {
		b.ObjectMetaApplyConfiguration = &metav1ac.ObjectMetaApplyConfiguration{}
	}
}

// WithLabels adds entries to the labels.
func (b *WidgetApplyConfiguration) WithLabels(entries map[string]string) *WidgetApplyConfiguration {
	b.ensureObjectMeta()
	b.ObjectMetaApplyConfiguration.WithLabels(entries)
	return b
}

// WithFinalizers adds values to the finalizers.
func (b *WidgetApplyConfiguration) WithFinalizers(values ...string) *WidgetApplyConfiguration {
	b.ensureObjectMeta()
	b.ObjectMetaApplyConfiguration.WithFinalizers(values...)
	return b
}

// WithSize sets spec.size.
func (b *WidgetApplyConfiguration) WithSize(v int32) *WidgetApplyConfiguration {
	if b.Spec == nil {
		b.Spec = &WidgetSpecApplyConfiguration{}
	}
	b.Spec.Size = &v
	return b
}

// WithColor sets spec.color.
func (b *WidgetApplyConfiguration) WithColor(v string) *WidgetApplyConfiguration {
	if b.Spec == nil {
		b.Spec = &WidgetSpecApplyConfiguration{}
	}
	b.Spec.Color = &v
	return b
}

// WithObservedSize sets status.observedSize.
func (b *WidgetApplyConfiguration) WithObservedSize(v int32) *WidgetApplyConfiguration {
	if b.Status == nil {
		b.Status = &WidgetStatusApplyConfiguration{}
	}
	b.Status.ObservedSize = &v
	return b
}

// GetKind returns the kind.
func (b *WidgetApplyConfiguration) GetKind() *string { return b.TypeMetaApplyConfiguration.Kind }

// GetAPIVersion returns the apiVersion.
func (b *WidgetApplyConfiguration) GetAPIVersion() *string {
	return b.TypeMetaApplyConfiguration.APIVersion
}

// GetName returns the name.
func (b *WidgetApplyConfiguration) GetName() *string {
	b.ensureObjectMeta()
	return b.ObjectMetaApplyConfiguration.Name
}

// GetNamespace returns the namespace.
func (b *WidgetApplyConfiguration) GetNamespace() *string {
	b.ensureObjectMeta()
	return b.ObjectMetaApplyConfiguration.Namespace
}
