package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"
)

// The manager's host writes, broken down from the host API server's audit
// log (the scale lab records every write there, lab.Options.AuditLog).
// The manager's own counter (rest_client_requests_total) says how many
// writes it made, not to what; the audit log names each write's verb and
// object, and its user agent tells the manager apart from kubefed and the
// rig, which write to the host too.

// scManagerAgent is how the manager binary's requests start their user
// agent (client-go's default: the binary's name, managerproc.Build).
const scManagerAgent = "fedfailover-manager/"

// scLeaderElectionLease is the manager's leader election Lease
// (cmd/manager LeaderElectionID): its renewals are writes by design.
const scLeaderElectionLease = "fedfailover.failover.fedfailover.io"

// auditEntry is what the breakdown reads of one audit event.
type auditEntry struct {
	Stage     string    `json:"stage"`
	Verb      string    `json:"verb"`
	UserAgent string    `json:"userAgent"`
	Received  time.Time `json:"requestReceivedTimestamp"`
	// RequestURI carries the fieldManager of an apply or update: which of
	// the manager's controllers wrote a policy's status.
	RequestURI string `json:"requestURI"`
	ObjectRef  *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// scHostWrite is one kind of the manager's host writes in the window.
type scHostWrite struct {
	// Request is "verb resource[/subresource]", with the object's name for
	// Leases (which Lease is renewed matters) and events' involved kinds
	// left out (an Event's name is generated), and "by <fieldManager>"
	// for a status write that names its field manager.
	Request   string  `json:"request"`
	Count     int     `json:"count"`
	PerSecond float64 `json:"per_second"`
}

// hostWritesFromAudit counts the manager's writes in the audit log r
// received in [from, to), by request, most frequent first. leaseRenewals
// are the updates of its leader election Lease among them; past says the
// log holds an entry (of any client) received at or after to, so every
// request of the window that completed is in it.
func hostWritesFromAudit(r io.Reader, from, to time.Time) (writes []scHostWrite, leaseRenewals int, past bool, err error) {
	counts := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEntry
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue // a line cut by a rotation or a write in progress
		}
		if !e.Received.Before(to) {
			past = true
		}
		if e.Stage != "ResponseComplete" || !strings.HasPrefix(e.UserAgent, scManagerAgent) ||
			e.Received.Before(from) || !e.Received.Before(to) || !isWriteVerb(e.Verb) {
			continue
		}
		req := e.Verb
		if e.ObjectRef != nil {
			req += " " + e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				req += "/" + e.ObjectRef.Subresource
			}
			if e.ObjectRef.Resource == "leases" {
				if e.ObjectRef.Name == scLeaderElectionLease && e.Verb == "update" {
					leaseRenewals++
				}
				req += " " + e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
			}
		}
		if fm := fieldManagerOf(e.RequestURI); fm != "" && e.ObjectRef != nil && e.ObjectRef.Subresource == "status" {
			req += " by " + fm
		}
		if e.ResponseStatus != nil && e.ResponseStatus.Code >= 400 {
			req += fmt.Sprintf(" (%d)", e.ResponseStatus.Code)
		}
		counts[req]++
	}
	if err := sc.Err(); err != nil {
		return nil, 0, false, err
	}
	secs := to.Sub(from).Seconds()
	for req, n := range counts {
		w := scHostWrite{Request: req, Count: n}
		if secs > 0 {
			w.PerSecond = round3(float64(n) / secs)
		}
		writes = append(writes, w)
	}
	sort.Slice(writes, func(i, j int) bool {
		if writes[i].Count != writes[j].Count {
			return writes[i].Count > writes[j].Count
		}
		return writes[i].Request < writes[j].Request
	})
	return writes, leaseRenewals, past, nil
}

// fieldManagerOf is the fieldManager query parameter of a request URI.
func fieldManagerOf(requestURI string) string {
	u, err := url.Parse(requestURI)
	if err != nil {
		return ""
	}
	return u.Query().Get("fieldManager")
}

// isWriteVerb: the audit log's verbs that change something.
func isWriteVerb(v string) bool {
	switch v {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// hostWritesFromAuditFile is hostWritesFromAudit of the file at path.
func hostWritesFromAuditFile(path string, from, to time.Time) ([]scHostWrite, int, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, false, err
	}
	defer func() { _ = f.Close() }()
	return hostWritesFromAudit(f, from, to)
}
