package sharding

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// a's term on m1: acquired at 0 s, renewed, taken over by b at 10 s.
var handoverWrites = []LeaseWrite{
	{Member: "m1", Holder: "a", At: at(0)}, {Member: "m1", Holder: "a", At: at(1)}, {Member: "m1", Holder: "a", At: at(2)},
	{Member: "m1", Holder: "b", At: at(10)}, {Member: "m1", Holder: "b", At: at(11)},
	{Member: "m2", Holder: "b", At: at(0)},
}

func TestTermsFollowTheHolders(t *testing.T) {
	terms := Terms(handoverWrites)
	if len(terms) != 3 {
		t.Fatalf("terms %v, want a then b on m1, b on m2", terms)
	}
	if a := terms[0]; a.Member != "m1" || a.Holder != "a" || !a.From.Equal(at(0)) || !a.Last.Equal(at(2)) || !a.To.Equal(at(10)) {
		t.Errorf("first term %v", a)
	}
	if b := terms[1]; b.Holder != "b" || !b.From.Equal(at(10)) || !b.To.IsZero() {
		t.Errorf("second term %v", b)
	}
	// A release ends the term without starting another.
	released := Terms([]LeaseWrite{{Member: "m1", Holder: "a", At: at(0)}, {Member: "m1", At: at(5)}, {Member: "m1", Holder: "b", At: at(6)}})
	if len(released) != 2 || !released[0].To.Equal(at(5)) || !released[1].From.Equal(at(6)) {
		t.Errorf("terms around a release: %v", released)
	}
}

func TestCheckTermsAcceptsWritesInTheWritersTerm(t *testing.T) {
	terms, bad := CheckTerms(handoverWrites, []MemberWrite{
		{Member: "m1", Writer: "a", At: at(3), What: "patch nodes n1"},
		{Member: "m1", Writer: "b", At: at(10.5), What: "delete pods db/db-0"},
		{Member: "m2", Writer: "b", At: at(4), What: "create events default/x"},
	})
	if len(bad) != 0 {
		t.Fatalf("violations %v", bad)
	}
	if terms[0].Writes != 1 || terms[1].Writes != 1 || terms[2].Writes != 1 {
		t.Errorf("write counts %v", terms)
	}
}

func TestCheckTermsReportsEveryWriteOutsideItsWritersTerm(t *testing.T) {
	leases := append([]LeaseWrite{{Member: "m3", Holder: "c", At: at(0)}, {Member: "m3", At: at(5)}}, handoverWrites...)
	for _, c := range []struct {
		name string
		w    MemberWrite
		want string
	}{
		{"a after b took m1 over", MemberWrite{Member: "m1", Writer: "a", At: at(10.2), What: "patch nodes n1"}, "in the term of m1 held by b"},
		{"b before it held m1", MemberWrite{Member: "m1", Writer: "b", At: at(9), What: "patch nodes n1"}, "in the term of m1 held by a"},
		{"before any Lease", MemberWrite{Member: "m1", Writer: "a", At: at(-1), What: "patch nodes n1"}, "outside any lease term"},
		{"after a release", MemberWrite{Member: "m3", Writer: "c", At: at(6), What: "patch nodes n1"}, "outside any lease term"},
		{"no identity", MemberWrite{Member: "m2", At: at(1), What: "patch nodes n1"}, "in the term of m2 held by b"},
		{"a member never leased", MemberWrite{Member: "m9", Writer: "a", At: at(1), What: "patch nodes n1"}, "outside any lease term"},
	} {
		_, bad := CheckTerms(leases, []MemberWrite{c.w})
		if len(bad) != 1 || !strings.Contains(bad[0], c.want) {
			t.Errorf("%s: violations %v, want one saying %q", c.name, bad, c.want)
		}
	}
}

const (
	hostLeaseUpdate   = `{"kind":"Event","level":"Request","stage":"ResponseComplete","verb":"update","userAgent":"manager/v0.0.0 fedfailover-shard","objectRef":{"resource":"leases","namespace":"shard-1","name":"fedfailover-member-member2","apiGroup":"coordination.k8s.io"},"responseStatus":{"code":200},"requestObject":{"kind":"Lease","spec":{"holderIdentity":"host-1a2b","leaseDurationSeconds":6}},"requestReceivedTimestamp":"2026-12-01T20:00:01.250000Z"}`
	hostLeaseRelease  = `{"kind":"Event","stage":"ResponseComplete","verb":"update","objectRef":{"resource":"leases","namespace":"shard-1","name":"fedfailover-member-member2"},"responseStatus":{"code":200},"requestObject":{"spec":{"leaseDurationSeconds":1}},"requestReceivedTimestamp":"2026-12-01T20:00:02Z"}`
	hostLeaseConflict = `{"kind":"Event","stage":"ResponseComplete","verb":"update","objectRef":{"resource":"leases","namespace":"shard-1","name":"fedfailover-member-member2"},"responseStatus":{"code":409},"requestObject":{"spec":{"holderIdentity":"host-9999"}},"requestReceivedTimestamp":"2026-12-01T20:00:03Z"}`
	hostPeerLease     = `{"kind":"Event","stage":"ResponseComplete","verb":"update","objectRef":{"resource":"leases","namespace":"shard-1","name":"fedfailover-peer-host-1a2b"},"responseStatus":{"code":200},"requestObject":{"spec":{"holderIdentity":"host-1a2b"}},"requestReceivedTimestamp":"2026-12-01T20:00:03Z"}`
	hostOtherNS       = `{"kind":"Event","stage":"ResponseComplete","verb":"create","objectRef":{"resource":"leases","namespace":"shard-0","name":"fedfailover-member-member2"},"responseStatus":{"code":201},"requestObject":{"spec":{"holderIdentity":"old"}},"requestReceivedTimestamp":"2026-12-01T20:00:03Z"}`
	memberTaint       = `{"kind":"Event","stage":"ResponseComplete","verb":"patch","userAgent":"fedfailover-member/host-1a2b","objectRef":{"resource":"nodes","name":"member2-node-1"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-01T20:00:04.5Z"}`
	memberStatus      = `{"kind":"Event","stage":"ResponseComplete","verb":"patch","userAgent":"fedfailover-member","objectRef":{"resource":"pods","namespace":"db","name":"db-0","subresource":"status"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-01T20:00:05Z"}`
	memberFailed      = `{"kind":"Event","stage":"ResponseComplete","verb":"delete","userAgent":"fedfailover-member/host-1a2b","objectRef":{"resource":"pods","namespace":"db","name":"db-0"},"responseStatus":{"code":404},"requestReceivedTimestamp":"2026-12-01T20:00:06Z"}`
	memberKubefed     = `{"kind":"Event","stage":"ResponseComplete","verb":"update","userAgent":"kubefed-controller/v0.10.0","objectRef":{"resource":"deployments","namespace":"db","name":"web"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-01T20:00:06Z"}`
	memberReceived    = `{"kind":"Event","stage":"RequestReceived","verb":"patch","userAgent":"fedfailover-member/host-1a2b","objectRef":{"resource":"nodes","name":"member2-node-1"},"requestReceivedTimestamp":"2026-12-01T20:00:04.5Z"}`
)

func TestReadLeaseWritesKeepsTheMemberLeasesOfTheNamespace(t *testing.T) {
	log := strings.Join([]string{hostLeaseUpdate, hostLeaseRelease, hostLeaseConflict, hostPeerLease, hostOtherNS, "{partial"}, "\n")
	got, err := ReadLeaseWrites(strings.NewReader(log), "shard-1")
	if err != nil {
		t.Fatal(err)
	}
	want := []LeaseWrite{
		{Member: "member2", Holder: "host-1a2b", At: time.Date(2026, 12, 1, 20, 0, 1, 250000000, time.UTC)},
		{Member: "member2", Holder: "", At: time.Date(2026, 12, 1, 20, 0, 2, 0, time.UTC)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Member != want[i].Member || got[i].Holder != want[i].Holder || !got[i].At.Equal(want[i].At) {
			t.Errorf("write %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestReadMemberWritesKeepsTheManagersSuccessfulWrites(t *testing.T) {
	log := strings.Join([]string{memberTaint, memberStatus, memberFailed, memberKubefed, memberReceived}, "\n") + "\n"
	got, err := ReadMemberWrites(strings.NewReader(log), "member2")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %+v, want the taint patch and the status patch", got)
	}
	if w := got[0]; w.Member != "member2" || w.Writer != "host-1a2b" || w.What != "patch nodes member2-node-1" ||
		!w.At.Equal(time.Date(2026, 12, 1, 20, 0, 4, 500000000, time.UTC)) {
		t.Errorf("taint write %+v", w)
	}
	if w := got[1]; w.Writer != "" || w.What != "patch pods/status db/db-0" {
		t.Errorf("write without identity %+v", w)
	}
}
