//go:build linux

package ha

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// auditPolicy logs every write to a ConfigMap at the Metadata level: who
// (the user agent names the replica), what, when it was received, and
// the response code. The replicas' PATCHes, which in the sharding
// scenarios are the label writes (the HA probe sends none), are logged
// with the object the server answered, whose labels and resourceVersion
// the ownership judge reads (shard_records_test.go).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: RequestResponse
  users: ["ha-replica"]
  verbs: ["patch"]
  omitStages: ["RequestReceived"]
  resources:
  - group: ""
    resources: ["configmaps"]
- level: Metadata
  verbs: ["create", "update", "patch", "delete"]
  resources:
  - group: ""
    resources: ["configmaps"]
- level: None
`

// userAgentPrefix starts the user agent of every replica's clients; the
// replica's identity follows it.
const userAgentPrefix = "ha-probe/"

// serverWrite is one write to a ConfigMap as the API server's audit log
// shows it.
type serverWrite struct {
	replica  string
	verb     string
	name     string
	received time.Time
	code     int // 0 when the server logged no response
}

// auditEvent is the part of an audit.k8s.io/v1 Event read here.
type auditEvent struct {
	AuditID   string `json:"auditID"`
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// replicaWrites reads the audit log and returns every ConfigMap write in
// namespace ns that a replica sent, one per request, in the order the
// server received them.
func replicaWrites(ns string) ([]serverWrite, error) {
	f, err := os.Open(auditLog)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	byID := map[string]*serverWrite{}
	var order []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("%s: %w", auditLog, err)
		}
		replica, ok := strings.CutPrefix(ev.UserAgent, userAgentPrefix)
		if !ok || ev.ObjectRef == nil || ev.ObjectRef.Namespace != ns {
			continue
		}
		w := byID[ev.AuditID]
		if w == nil {
			w = &serverWrite{replica: strings.SplitN(replica, "/", 2)[0], verb: ev.Verb, name: ev.ObjectRef.Name, received: ev.RequestReceivedTimestamp}
			byID[ev.AuditID] = w
			order = append(order, ev.AuditID)
		}
		if ev.ResponseStatus != nil {
			w.code = ev.ResponseStatus.Code
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := make([]serverWrite, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out, nil
}

// nonLeaderReceived lists the writes the server received from a replica
// while acqs says another replica held the Lease.
func nonLeaderReceived(writes []serverWrite, acqs []acquisition) []serverWrite {
	var out []serverWrite
	for _, w := range writes {
		if holderAt(acqs, w.received.UnixNano()) != w.replica {
			out = append(out, w)
		}
	}
	return out
}

func (w serverWrite) String() string {
	return fmt.Sprintf("%s %s %s received %s, status %d", w.replica, w.verb, w.name, w.received.Format("15:04:05.000000"), w.code)
}
