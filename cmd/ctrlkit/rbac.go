package main

import (
	"cmp"
	"slices"
	"strings"
)

// role is one Role or ClusterRole of config/rbac/role.yaml: the rules of
// the +kubebuilder:rbac markers that name one namespace and role name.
type role struct {
	Name      string
	Namespace string // empty for the ClusterRole
	Rules     []rule
}

// rule is one rule of a role, as controller-gen writes it: every field
// sorted, without duplicates. ResourceNames, when set, limits it to the
// objects of those names.
type rule struct {
	Groups, Resources, ResourceNames, Verbs []string
}

// marker is one +kubebuilder:rbac marker the generated code carries.
type marker struct {
	Namespace, RoleName string // both empty for the ClusterRole
	rule
}

// markers are the +kubebuilder:rbac markers of the generated project:
// what each piece of code calls, where that code is.
func markers(p *project) []marker {
	cluster := func(group, resources, verbs string) marker {
		return marker{rule: rule{Groups: []string{group}, Resources: strings.Split(resources, ";"), Verbs: strings.Split(verbs, ";")}}
	}
	named := func(m marker, names ...string) marker {
		m.ResourceNames = names
		return m
	}
	// internal/controller: the kind, its status, the finalizers of the
	// owner references it sets (a built-in kind: only the kind), and its
	// Events.
	ms := []marker{cluster(p.Group, p.Plural, "list;watch")}
	if p.Builtin == nil {
		ms = append(ms, cluster(p.Group, p.Plural+"/status", "update"), cluster(p.Group, p.Plural+"/finalizers", "update"))
	}
	ms = append(ms,
		cluster("", "events", "create;patch"),
		// main.go: secure metrics review each scrape's token and access.
		cluster("authentication.k8s.io", "tokenreviews", "create"),
		cluster("authorization.k8s.io", "subjectaccessreviews", "create"),
	)
	if p.Deployment() {
		ms = append(ms, cluster("apps", "deployments", "list;watch;create;patch"))
	}
	// main.go: the leader election Lease, in the operator's namespace,
	// read and written by its name only (a create cannot be limited to a
	// name).
	lease := named(cluster("coordination.k8s.io", "leases", "get;update"), p.Name)
	createLease := cluster("coordination.k8s.io", "leases", "create")
	for _, m := range []*marker{&lease, &createLease} {
		m.Namespace, m.RoleName = p.Namespace, p.Name+"-leader-election"
	}
	ms = append(ms, lease, createLease)
	if p.Webhook {
		// internal/admission: the certificates' Secret, in the operator's
		// namespace, read and written by its name only (a create cannot be
		// limited to a name), and the caBundle of the operator's own
		// webhook configurations, not of any other's.
		secret := named(cluster("", "secrets", "get;list;watch;update"), p.Name+"-webhook-certs")
		create := cluster("", "secrets", "create")
		for _, m := range []*marker{&secret, &create} {
			m.Namespace, m.RoleName = p.Namespace, p.Name+"-webhook-certs"
		}
		ms = append(ms, secret, create,
			named(cluster("admissionregistration.k8s.io", "validatingwebhookconfigurations", "get;patch"), p.Name+"-validating"),
			named(cluster("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "get;patch"), p.Name+"-mutating"))
	}
	return ms
}

// roles groups markers into roles and normalizes their rules as
// controller-gen v0.23 does (pkg/rbac: GenerateRoles), so that the
// pre-generated config/rbac/role.yaml is what `make manifests` writes:
// ClusterRole first, then Roles by namespace and name.
func roles(p *project) []role {
	var out []role
	for _, m := range markers(p) {
		name := cmp.Or(m.RoleName, p.Name)
		i := slices.IndexFunc(out, func(r role) bool { return r.Name == name && r.Namespace == m.Namespace })
		if i < 0 {
			out = append(out, role{Name: name, Namespace: m.Namespace})
			i = len(out) - 1
		}
		out[i].Rules = append(out[i].Rules, normalized(m.rule))
	}
	slices.SortFunc(out, func(a, b role) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	for i := range out {
		out[i].Rules = mergeRules(out[i].Rules)
	}
	return out
}

// mergeRules merges rules the way controller-gen does, in its order: the
// verbs of rules for the same groups and resources; then the resources of
// rules with the same groups and verbs; then the groups of rules with the
// same resources and verbs. The result is sorted by groups, then
// resources.
func mergeRules(rules []rule) []rule {
	join := func(s []string) string { return strings.Join(s, "&") }
	names := func(r rule) string { return join(r.ResourceNames) }
	merge := func(rules []rule, key func(rule) string, into func(dst *rule, src rule)) []rule {
		var out []rule
		for _, r := range rules {
			i := slices.IndexFunc(out, func(o rule) bool { return key(o) == key(r) })
			if i < 0 {
				out = append(out, r)
				continue
			}
			into(&out[i], r)
			out[i] = normalized(out[i])
		}
		return out
	}
	rules = merge(rules, func(r rule) string { return join(r.Groups) + " + " + join(r.Resources) + " + " + names(r) },
		func(dst *rule, src rule) { dst.Verbs = append(dst.Verbs, src.Verbs...) })
	rules = merge(rules, func(r rule) string { return join(r.Groups) + " + " + names(r) + " + " + join(r.Verbs) },
		func(dst *rule, src rule) { dst.Resources = append(dst.Resources, src.Resources...) })
	rules = merge(rules, func(r rule) string { return join(r.Resources) + " + " + names(r) + " + " + join(r.Verbs) },
		func(dst *rule, src rule) { dst.Groups = append(dst.Groups, src.Groups...) })
	// controller-gen sorts by "groups + resources + resourceNames + urls";
	// the generated project uses no URLs.
	key := func(r rule) string { return join(r.Groups) + " + " + join(r.Resources) + " + " + names(r) + " + " }
	slices.SortStableFunc(rules, func(a, b rule) int { return strings.Compare(key(a), key(b)) })
	return rules
}

// normalized returns r with every field sorted and without duplicates.
func normalized(r rule) rule {
	norm := func(s []string) []string { return slices.Compact(slices.Sorted(slices.Values(s))) }
	out := rule{Groups: norm(r.Groups), Resources: norm(r.Resources), Verbs: norm(r.Verbs)}
	if len(r.ResourceNames) > 0 {
		out.ResourceNames = norm(r.ResourceNames)
	}
	return out
}
