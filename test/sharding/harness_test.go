//go:build e2e

package sharding

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/lab"
	"github.com/fedfailover/fedfailover/test/managerproc"
	poller "github.com/fedfailover/fedfailover/test/poll"
)

// Shard Lease timings of the lab tests: a dead replica's members move after
// about 6 s.
const (
	shardLease = 6 * time.Second
	shardRenew = 4 * time.Second
	shardRetry = 1 * time.Second
	// handover bounds a takeover after the holder stopped renewing: the
	// lease duration, the peers' and the acquisition's retry periods, and
	// slack for a loaded lab.
	handover = shardLease + 3*shardRetry + 5*time.Second
)

// fixture is one test's view of the lab: its own host namespace for the
// Leases (so its lease terms are its own) and the time it started (so its
// audit records are its own).
type fixture struct {
	t       *testing.T
	st      *lab.State
	ns      string
	members []string
	host    client.Client
	start   time.Time
	logDir  string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := theLab.State()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", st.Cluster(lab.HostName).Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	host, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, st: st, host: host, start: time.Now(), logDir: filepath.Join(filepath.Dir(theLab.Dir), "logs", t.Name())}
	for _, c := range st.Clusters {
		if c.Role == lab.RoleMember {
			f.members = append(f.members, c.Name)
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fedfailover-shard-"}}
	if err := host.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	f.ns = ns.Name
	t.Cleanup(func() { _ = host.Delete(context.Background(), ns) })
	return f
}

func (f *fixture) addr(cluster string) string {
	return fmt.Sprintf("127.0.0.1:%d", f.st.Cluster(cluster).APIPort)
}

// replica is one manager process with --shard.
type replica struct {
	name    string
	proc    *managerproc.Process
	log     string
	metrics string         // its plain-HTTP metrics address
	iso     *lab.Isolation // set when it runs in a network namespace
	http    *http.Client
}

// startReplica starts a manager process with sharding on, in iso when it
// is set, with the extra flags given; it is stopped when the test ends
// (its log shown on failure).
func (f *fixture) startReplica(name string, iso *lab.Isolation, extra ...string) *replica {
	t := f.t
	t.Helper()
	r := &replica{name: name, iso: iso, metrics: freePort(t), log: filepath.Join(f.logDir, name+".log"),
		http: &http.Client{Timeout: 2 * time.Second}}
	if iso != nil {
		r.http.Transport = &http.Transport{DialContext: lab.DialInside(iso.Name)}
	}
	args := []string{"--kubeconfig=" + f.st.Cluster(lab.HostName).Kubeconfig, "--kubefed-namespace=" + lab.KubefedNS,
		"--leader-elect", "--leader-election-namespace=" + f.ns,
		"--shard", "--shard-lease-namespace=" + f.ns, "--shard-lease-duration=" + shardLease.String(),
		"--shard-renew-deadline=" + shardRenew.String(), "--shard-retry-period=" + shardRetry.String(),
		"--metrics-bind-address=" + r.metrics, "--metrics-secure=false", "--health-probe-bind-address=0"}
	args = append(args, extra...)
	p, err := managerproc.Start(managerproc.Options{Bin: managerBin, Args: args, Log: r.log, Isolation: iso})
	if err != nil {
		t.Fatal(err)
	}
	r.proc = p
	t.Cleanup(func() {
		if exited, _ := p.Exited(); !exited {
			if err := p.Stop(20 * time.Second); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		if t.Failed() {
			if b, err := os.ReadFile(r.log); err == nil {
				t.Logf("--- %s log (last 40 lines) ---\n%s", name, tail(string(b), 40))
			}
		}
	})
	return r
}

// alive reports whether the process still runs.
func (r *replica) alive() bool {
	exited, _ := r.proc.Exited()
	return !exited
}

var identityLine = regexp.MustCompile(`"msg":"Sharding members across replicas".*"identity":"([^"]+)"`)

// identity is the replica's shard identity, from its log ("" until it
// logged it).
func (r *replica) identity() string {
	b, err := os.ReadFile(r.log)
	if err != nil {
		return ""
	}
	ids := identityLine.FindAllSubmatch(b, -1)
	if len(ids) == 0 {
		return ""
	}
	return string(ids[len(ids)-1][1]) // the log is shared by restarts
}

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)`)
	labelPair  = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)
)

// scrape reads the replica's fedfailover_* metrics.
func (r *replica) scrape() ([]sample, error) { return r.scrapePrefix("fedfailover_") }

// leads reports whether the replica is the elected leader (controller-
// runtime's leader_election_master_status).
func (r *replica) leads() bool {
	samples, err := r.scrapePrefix("leader_election_master_status")
	if err != nil {
		return false
	}
	v, ok := value(samples, "leader_election_master_status", map[string]string{"name": leaderElectionID})
	return ok && v == 1
}

// scrapePrefix reads the replica's metrics whose names start with prefix.
func (r *replica) scrapePrefix(prefix string) ([]sample, error) {
	if !r.alive() {
		return nil, errors.New(r.name + " exited")
	}
	resp, err := r.http.Get("http://" + r.metrics + "/metrics")
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var out []sample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := sampleLine.FindStringSubmatch(sc.Text())
		if m == nil || !strings.HasPrefix(m[1], prefix) {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		s := sample{name: m[1], labels: map[string]string{}, value: v}
		for _, l := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.labels[l[1]] = l[2]
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// value is the sample of name whose labels include want.
func value(samples []sample, name string, want map[string]string) (float64, bool) {
	for _, s := range samples {
		if s.name != name {
			continue
		}
		match := true
		for k, v := range want {
			match = match && s.labels[k] == v
		}
		if match {
			return s.value, true
		}
	}
	return 0, false
}

// connected lists the members the replica reports connected; nil when its
// metrics cannot be read.
func (r *replica) connected() []string {
	samples, err := r.scrape()
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range samples {
		if s.name == "fedfailover_member_connected" && s.value == 1 {
			out = append(out, s.labels["cluster"])
		}
	}
	slices.Sort(out)
	return out
}

// connectedOnce is true when every member is connected by exactly one of
// replicas.
func connectedOnce(replicas []*replica, members []string) (bool, string) {
	by := map[string][]string{}
	for _, r := range replicas {
		for _, m := range r.connected() {
			by[m] = append(by[m], r.name)
		}
	}
	var bad []string
	for _, m := range members {
		if len(by[m]) != 1 {
			bad = append(bad, fmt.Sprintf("%s: %v", m, by[m]))
		}
	}
	return len(bad) == 0, strings.Join(bad, "; ")
}

// settled waits until every replica sees all of them as peers and each
// member is connected by exactly one, with the same owners on two polls in
// a row: the hand-overs of a peer's arrival or departure are over.
func settled(t *testing.T, replicas []*replica, members []string) {
	t.Helper()
	prev := ""
	poll(t, 2*time.Minute, 500*time.Millisecond, "each member connected by exactly one of the replicas, settled", func(context.Context) (bool, string) {
		for _, r := range replicas {
			samples, err := r.scrape()
			if err != nil {
				return false, err.Error()
			}
			if v, _ := value(samples, "fedfailover_shard_peers", nil); int(v) != len(replicas) {
				prev = ""
				return false, fmt.Sprintf("%s sees %v peers", r.name, v)
			}
		}
		if ok, why := connectedOnce(replicas, members); !ok {
			prev = ""
			return false, why
		}
		var owners []string
		for _, r := range replicas {
			owners = append(owners, fmt.Sprint(r.name, r.connected()))
		}
		cur := strings.Join(owners, " ")
		same := cur == prev
		prev = cur
		return same, "owners " + cur + " not yet seen twice"
	})
}

// connectionWatch samples every replica's connected members and records
// the first moment two reported the same member connected.
type connectionWatch struct {
	mu        sync.Mutex
	violation string
	done      chan struct{}
	stopped   chan struct{}
}

func watchConnections(t *testing.T, replicas []*replica) {
	w := &connectionWatch{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(w.stopped)
		for {
			select {
			case <-w.done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			by := map[string][]string{}
			for _, r := range replicas {
				for _, m := range r.connected() {
					by[m] = append(by[m], r.name)
				}
			}
			for m, rs := range by {
				if len(rs) > 1 {
					w.mu.Lock()
					if w.violation == "" {
						w.violation = fmt.Sprintf("%s connected by %v at %s", m, rs, time.Now().Format(stamp))
					}
					w.mu.Unlock()
				}
			}
		}
	}()
	t.Cleanup(func() {
		close(w.done)
		<-w.stopped
		if w.violation != "" {
			t.Error(w.violation)
		}
	})
}

// holders returns each member Lease's holder, by member.
func (f *fixture) holders(ctx context.Context) (map[string]string, error) {
	var list coordinationv1.LeaseList
	if err := f.host.List(ctx, &list, client.InNamespace(f.ns)); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, l := range list.Items {
		if m, ok := strings.CutPrefix(l.Name, memberLeasePrefix); ok {
			out[m] = ptr.Deref(l.Spec.HolderIdentity, "")
		}
	}
	return out, nil
}

// poll calls cond every interval until it returns true or timeout passes,
// then fails the test with the last reason given. It returns how long it
// took.
func poll(t *testing.T, timeout, every time.Duration, what string, cond func(ctx context.Context) (bool, string)) time.Duration {
	t.Helper()
	return poller.T(t, timeout, every, what, poller.Reason(cond))
}

// createPolicy creates a FailoverPolicy with node recovery for every member
// (fencing by Machine deletion; one of a member's two nodes may be lost)
// and deletes it when the test ends.
func (f *fixture) createPolicy(name string, notReadyFor v1alpha1.Duration) {
	t := f.t
	t.Helper()
	one := intstr.FromInt32(1)
	p := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.FailoverPolicySpec{NodeRecovery: &v1alpha1.NodeRecoverySpec{
			NotReadyFor: notReadyFor, Method: v1alpha1.RecoveryMethodAuto, MaxUnhealthy: &one,
			StormCooldown: "5s", Fencing: v1alpha1.FencingSpec{MachineInfrastructureDeleted: true},
		}}}
	if err := f.host.Create(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.deletePolicy(t, p) })
}

// deletePolicy deletes p, waits up to 20 s for the leader to run its
// finalizers (then removes them) and deletes the RecoveryGuards.
func (f *fixture) deletePolicy(t *testing.T, p *v1alpha1.FailoverPolicy) {
	t.Helper()
	name, ctx := p.Name, context.Background()
	if err := f.host.Delete(ctx, p); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting policy %s: %v", name, err)
	}
	// The leader runs the finalizers; one that does not within 20 s
	// leaves them to us.
	deadline := time.Now().Add(20 * time.Second)
	for {
		cur := &v1alpha1.FailoverPolicy{}
		err := f.host.Get(ctx, client.ObjectKeyFromObject(p), cur)
		if apierrors.IsNotFound(err) {
			break
		}
		if err == nil && time.Now().After(deadline) {
			patch := client.MergeFrom(cur.DeepCopy())
			cur.Finalizers = nil
			if err := f.host.Patch(ctx, cur, patch); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("removing the finalizers of policy %s: %v", name, err)
				break
			}
			deadline = time.Now().Add(time.Hour)
		}
		time.Sleep(200 * time.Millisecond) // polling with a deadline
	}
	// The storm state must not leak into the next test.
	if err := f.host.DeleteAllOf(ctx, &v1alpha1.RecoveryGuard{}); err != nil {
		t.Errorf("deleting RecoveryGuards: %v", err)
	}
}

// createDB creates a one-replica StatefulSet "db" with an RWO volume in
// namespace ns of each member; each member's namespace is deleted when the
// test ends.
func (f *fixture) createDB(ns string) {
	t := f.t
	t.Helper()
	for _, m := range f.members {
		if _, err := theLab.CreateStatefulSetWithVolumes(t.Context(), m, ns, "db", 1); err != nil {
			t.Fatal(err)
		}
		cl := theLab.MustClient(m)
		t.Cleanup(func() {
			_ = cl.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		})
	}
}

// dbPod waits for a Ready pod of the StatefulSet db in member's namespace
// ns on a node other than notOn, with its volume attached there only.
func (f *fixture) dbPod(member, ns, notOn string, timeout time.Duration) *corev1.Pod {
	t := f.t
	t.Helper()
	cl := theLab.MustClient(member)
	var got *corev1.Pod
	poll(t, timeout, 500*time.Millisecond, "db pod Ready in "+member+" off "+notOn, func(ctx context.Context) (bool, string) {
		pods := &corev1.PodList{}
		if err := cl.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": "db"}); err != nil {
			return false, err.Error()
		}
		var seen []string
		for i := range pods.Items {
			p := &pods.Items[i]
			seen = append(seen, fmt.Sprintf("%s %s on %q deleting=%v", p.Name, p.Status.Phase, p.Spec.NodeName, p.DeletionTimestamp != nil))
			if !lab.PodReady(p) || p.Spec.NodeName == notOn || p.DeletionTimestamp != nil {
				continue
			}
			if ok, why := attachedOnlyTo(ctx, cl, p); !ok {
				seen = append(seen, why)
				continue
			}
			got = p
			return true, ""
		}
		return false, strings.Join(seen, "; ")
	})
	return got
}

// attachedOnlyTo checks that the pod's volume is attached to its node and
// has no attachment elsewhere.
func attachedOnlyTo(ctx context.Context, cl client.Client, p *corev1.Pod) (bool, string) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: lab.VolumeTemplateName + "-" + p.Name}, pvc); err != nil {
		return false, err.Error()
	}
	var vas storagev1.VolumeAttachmentList
	if err := cl.List(ctx, &vas); err != nil {
		return false, err.Error()
	}
	var on []string
	attached := false
	for _, va := range vas.Items {
		if ptr.Deref(va.Spec.Source.PersistentVolumeName, "") != pvc.Spec.VolumeName {
			continue
		}
		on = append(on, va.Spec.NodeName)
		attached = attached || (va.Spec.NodeName == p.Spec.NodeName && va.Status.Attached)
	}
	if !attached || len(on) != 1 {
		return false, fmt.Sprintf("volume %s: attachments on %v, want attached on %s only", pvc.Spec.VolumeName, on, p.Spec.NodeName)
	}
	return true, ""
}

// record is the NodeRecovery record of the member's node (the latest), or
// nil.
func (f *fixture) record(ctx context.Context, member, node string) (*v1alpha1.NodeRecovery, error) {
	var list v1alpha1.NodeRecoveryList
	if err := f.host.List(ctx, &list); err != nil {
		return nil, err
	}
	var rec *v1alpha1.NodeRecovery
	for i := range list.Items {
		r := &list.Items[i]
		if r.Spec.Cluster == member && r.Spec.Node == node && !r.CreationTimestamp.Time.Before(f.start.Truncate(time.Second)) &&
			(rec == nil || rec.CreationTimestamp.Before(&r.CreationTimestamp)) {
			rec = r
		}
	}
	return rec, nil
}

func describe(r *v1alpha1.NodeRecovery) string {
	if r == nil {
		return "no record"
	}
	return fmt.Sprintf("record %s phase=%s method=%s evidence=%s intentAt=%v message=%q",
		r.Name, r.Status.Phase, r.Status.Method, r.Status.Evidence, r.Status.IntentAt, r.Status.Message)
}

func oosTainted(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeOutOfService })
}

// powerOff switches node off with the given evidence on its Machine; when
// the test ends the node is powered on again and the out-of-service taint
// (removed by the member's owner once the node is Ready) is made sure to be
// gone for the next test.
func (f *fixture) powerOff(member, node string, ev lab.Evidence) {
	t := f.t
	t.Helper()
	if err := theLab.PowerOff(t.Context(), node, ev); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.restore(member, node) })
}

// restore powers node on (if it is still off), waits for it to be Ready
// and for its taint to be removed; a taint left after 30 s is removed here.
// Whether it is still off is the lab's to say: a node found lost by evidence
// may still report Ready=True.
func (f *fixture) restore(member, node string) {
	t := f.t
	ctx := context.Background()
	cl := theLab.MustClient(member)
	n := &corev1.Node{}
	off, err := theLab.Faulted(node)
	if err == nil && !off && cl.Get(ctx, client.ObjectKey{Name: node}, n) == nil && lab.NodeReadyStatus(n) == corev1.ConditionTrue && !oosTainted(n) {
		return
	}
	if err := theLab.Restore(ctx, node); err != nil {
		t.Errorf("restore %s: %v", node, err)
	}
	if err := theLab.WaitNodeReady(ctx, cl, node, corev1.ConditionTrue, 60*time.Second); err != nil {
		t.Errorf("restore %s: %v", node, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if err := cl.Get(ctx, client.ObjectKey{Name: node}, n); err == nil && !oosTainted(n) {
			return
		}
		time.Sleep(250 * time.Millisecond) // polling with a deadline
	}
	t.Logf("%s still tainted out-of-service 30 s after it was Ready: removing the taint", node)
	upd := n.DeepCopy()
	upd.Spec.Taints = slices.DeleteFunc(upd.Spec.Taints, func(tn corev1.Taint) bool { return tn.Key == corev1.TaintNodeOutOfService })
	if err := cl.Patch(ctx, upd, client.MergeFrom(n)); err != nil {
		t.Errorf("removing the taint of %s: %v", node, err)
	}
}

// auditSince reads the member Lease writes of the fixture's namespace from
// the host's audit log and fedfailover's writes since the fixture started
// from every member's.
func (f *fixture) auditSince() ([]LeaseWrite, []MemberWrite, error) {
	read := func(c string, fn func(*os.File) error) error {
		file, err := os.Open(lab.AuditLogPath(f.st.Cluster(c)))
		if err != nil {
			return err
		}
		defer func() { _ = file.Close() }()
		return fn(file)
	}
	var leases []LeaseWrite
	err := read(lab.HostName, func(file *os.File) (err error) {
		leases, err = ReadLeaseWrites(file, f.ns)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("host audit log: %w", err)
	}
	var writes []MemberWrite
	for _, m := range f.members {
		err := read(m, func(file *os.File) error {
			ws, err := ReadMemberWrites(file, m)
			for _, w := range ws {
				if !w.At.Before(f.start) {
					writes = append(writes, w)
				}
			}
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("%s audit log: %w", m, err)
		}
	}
	return leases, writes, nil
}

// checkTerms asserts the invariant over everything the test did: no write
// to a member outside its writer's lease term. It logs the terms and
// returns them with the writes.
func (f *fixture) checkTerms() ([]Term, []MemberWrite) {
	t := f.t
	t.Helper()
	leases, writes, err := f.auditSince()
	if err != nil {
		t.Fatal(err)
	}
	terms, bad := CheckTerms(leases, writes)
	for _, tm := range terms {
		t.Logf("term: %s", tm)
	}
	t.Logf("%d Lease writes, %d member writes by fedfailover, %d terms", len(leases), len(writes), len(terms))
	for _, b := range bad {
		t.Errorf("invariant broken: %s", b)
	}
	return terms, writes
}

// lastWrite is the last write of writer to member (zero when none).
func lastWrite(writes []MemberWrite, member, writer string) time.Time {
	var last time.Time
	for _, w := range writes {
		if w.Member == member && w.Writer == writer && w.At.After(last) {
			last = w.At
		}
	}
	return last
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
