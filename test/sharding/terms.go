// Package sharding tests members sharded across separate manager processes
// on a local federation of four members (build tag e2e). This file is the
// pure part, unit-tested without a lab: reading fedfailover's writes from
// the API servers' audit logs and checking them against the member Leases'
// terms.
package sharding

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/fedfailover/fedfailover/test/lab"
)

// The names the manager uses (controllers/member): the member Lease prefix
// and the member clients' user agent, "fedfailover-member/<identity>" with
// sharding on.
const (
	memberLeasePrefix = "fedfailover-member-"
	memberAgent       = "fedfailover-member"
)

// LeaseWrite is one successful write of a member Lease, as the host API
// server received it.
type LeaseWrite struct {
	Member string
	// Holder is the holder the write named; "" releases the Lease.
	Holder string
	At     time.Time
}

// MemberWrite is one successful write by a manager to a member API server.
type MemberWrite struct {
	Member string
	// Writer is the shard identity in the user agent; "" when it has none.
	Writer string
	At     time.Time
	// What is "verb resource namespace/name", for messages.
	What string
}

// Term is one lease term: from the first Lease write naming Holder until
// the next write naming someone else or no one (To, zero while open).
type Term struct {
	Member string
	Holder string
	From   time.Time
	// Last is the holder's last write of the Lease in the term (its last
	// renewal).
	Last time.Time
	To   time.Time
	// Writes counts the member writes that arrived in the term.
	Writes int
}

func (t Term) contains(at time.Time) bool {
	return !at.Before(t.From) && (t.To.IsZero() || at.Before(t.To))
}

func (t Term) String() string {
	to := "open"
	if !t.To.IsZero() {
		to = t.To.Format(stamp)
	}
	return fmt.Sprintf("%s held by %s [%s, %s) last renewed %s, %d writes", t.Member, t.Holder, t.From.Format(stamp), to, t.Last.Format(stamp), t.Writes)
}

const stamp = "15:04:05.000000"

// Terms returns the lease terms of every member, per member in time order.
func Terms(leases []LeaseWrite) []Term {
	sorted := slices.Clone(leases)
	slices.SortStableFunc(sorted, func(a, b LeaseWrite) int {
		if c := strings.Compare(a.Member, b.Member); c != 0 {
			return c
		}
		return a.At.Compare(b.At)
	})
	var terms []Term
	open := -1 // index of the member's open term, if any
	for i, l := range sorted {
		if i > 0 && sorted[i-1].Member != l.Member {
			open = -1
		}
		if open >= 0 && terms[open].Holder == l.Holder {
			terms[open].Last = l.At // a renewal
			continue
		}
		if open >= 0 {
			terms[open].To = l.At
			open = -1
		}
		if l.Holder != "" {
			terms = append(terms, Term{Member: l.Member, Holder: l.Holder, From: l.At, Last: l.At})
			open = len(terms) - 1
		}
	}
	return terms
}

// CheckTerms puts every member write into the lease term it arrived in and
// returns the terms with their write counts and one message per write that
// breaks the invariant: a write is allowed only in a term of its own
// writer, so no two replicas ever write to a member in the same term.
func CheckTerms(leases []LeaseWrite, writes []MemberWrite) ([]Term, []string) {
	terms := Terms(leases)
	var bad []string
	for _, w := range writes {
		i := slices.IndexFunc(terms, func(t Term) bool { return t.Member == w.Member && t.contains(w.At) })
		switch {
		case i < 0:
			bad = append(bad, fmt.Sprintf("%s: %q wrote %s at %s outside any lease term", w.Member, w.Writer, w.What, w.At.Format(stamp)))
		case terms[i].Holder != w.Writer:
			bad = append(bad, fmt.Sprintf("%s: %q wrote %s at %s in the term of %s", w.Member, w.Writer, w.What, w.At.Format(stamp), terms[i]))
		default:
			terms[i].Writes++
		}
	}
	return terms, bad
}

// eachLine calls fn with every whole line of r.
func eachLine(r io.Reader, fn func([]byte)) error {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			fn(line)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// ReadLeaseWrites returns the writes of the member Leases in namespace ns
// from a host API server's audit log (its Lease writes carry the request).
func ReadLeaseWrites(r io.Reader, ns string) ([]LeaseWrite, error) {
	var out []LeaseWrite
	err := eachLine(r, func(line []byte) {
		e, ok := lab.SuccessfulWrite(line)
		if !ok || e.ObjectRef.Resource != "leases" || e.ObjectRef.Namespace != ns ||
			!strings.HasPrefix(e.ObjectRef.Name, memberLeasePrefix) || e.Verb == "delete" || e.Verb == "deletecollection" {
			return
		}
		var lease struct {
			Spec struct {
				HolderIdentity *string `json:"holderIdentity"`
			} `json:"spec"`
		}
		if json.Unmarshal(e.RequestObject, &lease) != nil {
			return
		}
		holder := ""
		if lease.Spec.HolderIdentity != nil {
			holder = *lease.Spec.HolderIdentity
		}
		out = append(out, LeaseWrite{Member: strings.TrimPrefix(e.ObjectRef.Name, memberLeasePrefix), Holder: holder, At: e.Received})
	})
	return out, err
}

// ReadMemberWrites returns the managers' writes from a member API server's
// audit log.
func ReadMemberWrites(r io.Reader, member string) ([]MemberWrite, error) {
	var out []MemberWrite
	err := eachLine(r, func(line []byte) {
		e, ok := lab.SuccessfulWrite(line)
		if !ok || !strings.HasPrefix(e.UserAgent, memberAgent) {
			return
		}
		res := e.Resource()
		out = append(out, MemberWrite{Member: member, Writer: WriterOf(e.UserAgent), At: e.Received,
			What: strings.TrimSpace(fmt.Sprintf("%s %s %s", e.Verb, res, strings.TrimPrefix(e.ObjectRef.Namespace+"/"+e.ObjectRef.Name, "/")))})
	})
	return out, err
}

// WriterOf is the shard identity in a member client's user agent; "" when
// the agent carries none (a manager without sharding).
func WriterOf(userAgent string) string {
	id, ok := strings.CutPrefix(userAgent, memberAgent+"/")
	if !ok {
		return ""
	}
	return id
}
