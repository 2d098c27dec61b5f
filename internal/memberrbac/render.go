package memberrbac

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Defaults of Options.
const (
	DefaultNamespace = "fedfailover-system"
	DefaultName      = "fedfailover-member"

	defaultKubefedNamespace = "kube-federation-system"
)

// Options name what is created in the member.
type Options struct {
	// Namespace of the ServiceAccount and its token Secret.
	Namespace string
	// Name of the ServiceAccount, the ClusterRole, the Role and their
	// bindings; the token Secret is NAME-token.
	Name string
	// Member, if set, is the KubeFedCluster's name in the host: it fills
	// in the host-side commands of the manifest's header.
	Member string
	// KubefedNamespace is the kubefed namespace of the host, for the header.
	KubefedNamespace string
}

func (o Options) withDefaults() Options {
	o.Namespace = cmp.Or(o.Namespace, DefaultNamespace)
	o.Name = cmp.Or(o.Name, DefaultName)
	o.KubefedNamespace = cmp.Or(o.KubefedNamespace, defaultKubefedNamespace)
	return o
}

// Validate refuses names the API server would refuse.
func (o Options) Validate() error {
	o = o.withDefaults()
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return fmt.Errorf("namespace %q: %s", o.Namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(TokenSecretName(o.Name)); len(errs) > 0 {
		return fmt.Errorf("name %q: %s", o.Name, strings.Join(errs, "; "))
	}
	if o.Member != "" {
		if errs := validation.IsDNS1123Subdomain(o.Member); len(errs) > 0 {
			return fmt.Errorf("member %q: %s", o.Member, strings.Join(errs, "; "))
		}
	}
	return nil
}

// TokenSecretName is the name of the ServiceAccount's token Secret.
func TokenSecretName(name string) string { return name + "-token" }

var labels = map[string]string{
	"app.kubernetes.io/name":      "fedfailover",
	"app.kubernetes.io/component": "member-rbac",
	"app.kubernetes.io/part-of":   "fedfailover",
}

// ClusterRules are the rules of the ClusterRole: every need without a
// namespace, one rule per API group and resource (verbs merged), then the
// non-resource URLs.
func ClusterRules() []rbacv1.PolicyRule {
	return rulesOf(func(n Need) bool { return n.Namespace == "" })
}

// NamespacedRules are the rules of the Role in each namespace that has
// needs of its own.
func NamespacedRules() map[string][]rbacv1.PolicyRule {
	out := map[string][]rbacv1.PolicyRule{}
	for _, n := range needs {
		if n.Namespace != "" && out[n.Namespace] == nil {
			ns := n.Namespace
			out[ns] = rulesOf(func(n Need) bool { return n.Namespace == ns })
		}
	}
	return out
}

func rulesOf(keep func(Need) bool) []rbacv1.PolicyRule {
	type key struct{ group, resource string }
	verbs := map[key][]string{}
	var urls, urlVerbs []string
	for _, n := range needs {
		if !keep(n) {
			continue
		}
		if n.Resource == "" {
			urls, urlVerbs = union(urls, n.NonResourceURLs), union(urlVerbs, n.Verbs)
			continue
		}
		k := key{n.Group, n.Resource}
		verbs[k] = union(verbs[k], n.Verbs)
	}
	keys := make([]key, 0, len(verbs))
	for k := range verbs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.resource, b.resource)) })
	out := make([]rbacv1.PolicyRule, 0, len(keys)+1)
	for _, k := range keys {
		out = append(out, rbacv1.PolicyRule{APIGroups: []string{k.group}, Resources: []string{k.resource}, Verbs: verbs[k]})
	}
	if len(urls) > 0 {
		out = append(out, rbacv1.PolicyRule{NonResourceURLs: urls, Verbs: urlVerbs})
	}
	return out
}

func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// Objects are what to apply in a member: the namespace, the ServiceAccount
// and its token Secret, the ClusterRole and a Role per namespace with needs
// of its own, and their bindings.
func Objects(o Options) []runtime.Object {
	o = o.withDefaults()
	meta := func(ns, name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}
	}
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: o.Namespace, Name: o.Name}
	objs := []runtime.Object{
		&corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: metav1.ObjectMeta{Name: o.Namespace}},
		&corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta(o.Namespace, o.Name)},
		&corev1.Secret{TypeMeta: typeMeta("v1", "Secret"), ObjectMeta: func() metav1.ObjectMeta {
			m := meta(o.Namespace, TokenSecretName(o.Name))
			m.Annotations = map[string]string{corev1.ServiceAccountNameKey: o.Name}
			return m
		}(), Type: corev1.SecretTypeServiceAccountToken},
		&rbacv1.ClusterRole{TypeMeta: typeMeta(rbacv1.SchemeGroupVersion.String(), "ClusterRole"), ObjectMeta: meta("", o.Name),
			Rules: ClusterRules()},
		&rbacv1.ClusterRoleBinding{TypeMeta: typeMeta(rbacv1.SchemeGroupVersion.String(), "ClusterRoleBinding"), ObjectMeta: meta("", o.Name),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: o.Name},
			Subjects: []rbacv1.Subject{sa}},
	}
	roles := NamespacedRules()
	namespaces := make([]string, 0, len(roles))
	for ns := range roles {
		namespaces = append(namespaces, ns)
	}
	slices.Sort(namespaces)
	for _, ns := range namespaces {
		objs = append(objs,
			&rbacv1.Role{TypeMeta: typeMeta(rbacv1.SchemeGroupVersion.String(), "Role"), ObjectMeta: meta(ns, o.Name), Rules: roles[ns]},
			&rbacv1.RoleBinding{TypeMeta: typeMeta(rbacv1.SchemeGroupVersion.String(), "RoleBinding"), ObjectMeta: meta(ns, o.Name),
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: o.Name},
				Subjects: []rbacv1.Subject{sa}})
	}
	return objs
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// Manifest is Objects as a YAML stream for `kubectl apply -f -`, with a
// header that says what it is and what to do next.
func Manifest(o Options) ([]byte, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	var b bytes.Buffer
	b.WriteString(header(o))
	for _, obj := range Objects(o) {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, fmt.Errorf("converting %T: %w", obj, err)
		}
		// Nothing but what the object says: no empty timestamps or status.
		if m, ok := u["metadata"].(map[string]any); ok {
			delete(m, "creationTimestamp")
		}
		delete(u, "status")
		if s, ok := u["spec"].(map[string]any); ok && len(s) == 0 {
			delete(u, "spec")
		}
		y, err := yaml.Marshal(u)
		if err != nil {
			return nil, fmt.Errorf("encoding %T: %w", obj, err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes(), nil
}

func header(o Options) string {
	member := cmp.Or(o.Member, "MEMBER")
	secret := member + "-fedfailover"
	lines := []string{
		"fedfailover's least-privilege credentials for one member cluster:",
		"a ServiceAccount with exactly the permissions fedfailover uses in a member",
		"(docs/members.md#least-privilege-mode), and a Secret the member fills with its token.",
		"",
		"1. In the member:",
		"     " + command(o) + " | kubectl --context " + member + " apply -f -",
		"2. In the host, a Secret in the kubefed namespace with that token, labelled for the member:",
		fmt.Sprintf("     kubectl --context %s -n %s get secret %s -o jsonpath='{.data.token}' | base64 -d |",
			member, o.Namespace, TokenSecretName(o.Name)),
		fmt.Sprintf("       kubectl --context HOST -n %s create secret generic %s --from-file=token=/dev/stdin", o.KubefedNamespace, secret),
		fmt.Sprintf("     kubectl --context HOST -n %s label secret %s failover.fedfailover.io/credentials-for=%s",
			o.KubefedNamespace, secret, member),
		"3. In the host, point fedfailover (not kubefed) at it:",
		fmt.Sprintf("     kubectl --context HOST -n %s annotate kubefedcluster %s failover.fedfailover.io/credentials-secret=%s",
			o.KubefedNamespace, member, secret),
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(strings.TrimRight("# "+l, " ") + "\n")
	}
	return b.String()
}

// command is the `kubectl failover member-rbac` that prints o's manifest.
func command(o Options) string {
	c := "kubectl failover member-rbac"
	if o.Namespace != DefaultNamespace {
		c += " -n " + o.Namespace
	}
	if o.Name != DefaultName {
		c += " --name " + o.Name
	}
	if o.Member != "" {
		c += " --member " + o.Member
	}
	if o.KubefedNamespace != defaultKubefedNamespace {
		c += " --kubefed-namespace " + o.KubefedNamespace
	}
	return c
}

// MarkdownTable is the table of docs/members.md: one row per need.
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| resource | verbs | granted by | used by | for |\n| --- | --- | --- | --- | --- |\n")
	for _, n := range needs {
		verbs := make([]string, len(n.Verbs))
		for i, v := range n.Verbs {
			verbs[i] = "`" + v + "`"
		}
		what := "`" + n.what() + "`"
		if n.Resource == "" {
			what = strings.ReplaceAll("`"+n.what()+"`", ", ", "`, `")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", what, strings.Join(verbs, ", "), n.scope(), "`controllers/"+n.By+"`", n.Why)
	}
	return b.String()
}
