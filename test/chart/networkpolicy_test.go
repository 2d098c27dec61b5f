package chart

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// networkPolicyValues turn the NetworkPolicy on with the two required
// address lists.
var networkPolicyValues = []string{"networkPolicy.enabled=true",
	"networkPolicy.apiServer.cidrs={10.96.0.10/32,172.18.0.2/32}", "networkPolicy.members.cidrs={192.168.10.0/24,2001:db8::/64}"}

func renderNetworkPolicy(t *testing.T, set ...string) *networkingv1.NetworkPolicy {
	t.Helper()
	objs := helmTemplate(t, append(slices.Clone(networkPolicyValues), set...)...)
	u := find(objs, "NetworkPolicy", namespace, managerName)
	if u == nil {
		t.Fatalf("no NetworkPolicy %s", managerName)
	}
	np := &networkingv1.NetworkPolicy{}
	convert(t, u, np)
	// It selects the manager's pods, and only them.
	d := managerDeployment(t, objs)
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || len(np.Spec.PodSelector.MatchLabels) == 0 || !sel.Matches(labelSet(d.Spec.Template.Labels)) {
		t.Errorf("podSelector %+v does not select the manager's pods %v", np.Spec.PodSelector, d.Spec.Template.Labels)
	}
	if want := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}; !slices.Equal(np.Spec.PolicyTypes, want) {
		t.Errorf("policyTypes %v, want %v", np.Spec.PolicyTypes, want)
	}
	return np
}

type labelSet map[string]string

func (l labelSet) Has(k string) bool              { _, ok := l[k]; return ok }
func (l labelSet) Get(k string) string            { return l[k] }
func (l labelSet) Lookup(k string) (string, bool) { v, ok := l[k]; return v, ok }

func tcp(ports ...int) []networkingv1.NetworkPolicyPort {
	return portsOf(corev1.ProtocolTCP, ports...)
}

func portsOf(proto corev1.Protocol, ports ...int) []networkingv1.NetworkPolicyPort {
	var out []networkingv1.NetworkPolicyPort
	for _, p := range ports {
		port := intstr.FromInt32(int32(p))
		out = append(out, networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &port})
	}
	return out
}

func ipBlocks(cidrs ...string) []networkingv1.NetworkPolicyPeer {
	var out []networkingv1.NetworkPolicyPeer
	for _, c := range cidrs {
		out = append(out, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c}})
	}
	return out
}

func selectorPeer(ns, pod map[string]string) []networkingv1.NetworkPolicyPeer {
	return []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: ns}, PodSelector: &metav1.LabelSelector{MatchLabels: pod}}}
}

var dnsRule = networkingv1.NetworkPolicyEgressRule{
	To:    selectorPeer(map[string]string{"kubernetes.io/metadata.name": "kube-system"}, map[string]string{"k8s-app": "kube-dns"}),
	Ports: append(portsOf(corev1.ProtocolUDP, 53), tcp(53)...),
}

// TestNetworkPolicy: off by default; on, it allows exactly what the values
// say: egress to the host API server, the members and DNS, ingress to the
// metrics port from Prometheus' pods.
func TestNetworkPolicy(t *testing.T) {
	t.Run("off by default", func(t *testing.T) {
		if hasKind(helmTemplate(t), "NetworkPolicy") {
			t.Error("a NetworkPolicy is rendered by default")
		}
		if hasKind(helmTemplate(t, everyOption...), "NetworkPolicy") != slices.Contains(everyOption, "networkPolicy.enabled=true") {
			t.Error("everyOption and the NetworkPolicy disagree")
		}
	})

	t.Run("defaults", func(t *testing.T) {
		np := renderNetworkPolicy(t)
		wantIngress := []networkingv1.NetworkPolicyIngressRule{{
			From:  selectorPeer(map[string]string{"kubernetes.io/metadata.name": "monitoring"}, map[string]string{"app.kubernetes.io/name": "prometheus"}),
			Ports: tcp(8443),
		}}
		wantEgress := []networkingv1.NetworkPolicyEgressRule{
			{To: ipBlocks("10.96.0.10/32", "172.18.0.2/32"), Ports: tcp(443, 6443)},
			{To: ipBlocks("192.168.10.0/24", "2001:db8::/64"), Ports: tcp(443, 6443)},
			dnsRule,
		}
		assertRules(t, np, wantIngress, wantEgress)
	})

	t.Run("every value", func(t *testing.T) {
		np := renderNetworkPolicy(t, "metrics.port=9443",
			"networkPolicy.apiServer.ports={6443}", "networkPolicy.members.ports={8443,443}",
			"networkPolicy.dns.enabled=false",
			"networkPolicy.metrics.namespaceSelector.matchLabels.team=obs", "networkPolicy.metrics.podSelector.matchLabels.app=vmagent",
			"networkPolicy.extraEgress[0].to[0].ipBlock.cidr=10.1.2.3/32", "networkPolicy.extraEgress[0].ports[0].port=3128",
			"networkPolicy.extraIngress[0].from[0].podSelector.matchLabels.app=debug")
		port3128 := intstr.FromInt32(3128)
		wantIngress := []networkingv1.NetworkPolicyIngressRule{
			{
				From: selectorPeer(map[string]string{"kubernetes.io/metadata.name": "monitoring", "team": "obs"},
					map[string]string{"app.kubernetes.io/name": "prometheus", "app": "vmagent"}),
				Ports: tcp(9443),
			},
			{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "debug"}}}}},
		}
		wantEgress := []networkingv1.NetworkPolicyEgressRule{
			{To: ipBlocks("10.96.0.10/32", "172.18.0.2/32"), Ports: tcp(6443)},
			{To: ipBlocks("192.168.10.0/24", "2001:db8::/64"), Ports: tcp(8443, 443)},
			{To: ipBlocks("10.1.2.3/32"), Ports: []networkingv1.NetworkPolicyPort{{Port: &port3128}}},
		}
		assertRules(t, np, wantIngress, wantEgress)
	})

	t.Run("metrics off: no ingress at all", func(t *testing.T) {
		np := renderNetworkPolicy(t, "metrics.enabled=false")
		if len(np.Spec.Ingress) != 0 {
			t.Errorf("ingress %+v, want none", np.Spec.Ingress)
		}
	})

	t.Run("the address lists are required", func(t *testing.T) {
		for _, missing := range []string{"apiServer", "members"} {
			var set []string
			for _, v := range networkPolicyValues {
				if !strings.HasPrefix(v, "networkPolicy."+missing+".") {
					set = append(set, v)
				}
			}
			msg := helmTemplateFails(t, set...)
			if !strings.Contains(msg, "networkPolicy."+missing+".cidrs") {
				t.Errorf("without %s.cidrs: %s", missing, msg)
			}
		}
	})
}

func assertRules(t *testing.T, np *networkingv1.NetworkPolicy, ingress []networkingv1.NetworkPolicyIngressRule, egress []networkingv1.NetworkPolicyEgressRule) {
	t.Helper()
	if !reflect.DeepEqual(np.Spec.Ingress, ingress) {
		t.Errorf("ingress\n  %+v\nwant\n  %+v", np.Spec.Ingress, ingress)
	}
	if !reflect.DeepEqual(np.Spec.Egress, egress) {
		t.Errorf("egress\n  %+v\nwant\n  %+v", np.Spec.Egress, egress)
	}
}
