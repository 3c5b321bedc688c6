package recorder

import "time"

// The beats of deployments with several elections per process
// (protocol.BeatSubject): each process beats once for all its elections,
// and a Bully or ring leader there sends its own heartbeats ten times
// slower than configured. A leader counts as heard while its process
// beats: Silence takes the later of its last heartbeat and its process's
// last beat. A beat names the member and the deployment (the cluster
// after which its processes name their connections, conn), and the
// elections of a deployment are learnt from its batches (Via): a beat of
// member 3 of one deployment does not keep member 3 of another heard.

// maxBeats bounds the (deployment, member) pairs followed; a pair beyond
// it is not followed until the recorder is made anew.
const maxBeats = 1 << 16

// beatKey is a member of a deployment.
type beatKey struct {
	conn   string
	member uint64
}

// HeardBeat notes the beat of member of the deployment conn, handled at
// at: the caller checked it (its signature, its age).
func (r *Recorder) HeardBeat(conn string, member uint64, at time.Time) {
	k := beatKey{conn, member}
	if _, ok := r.beats[k]; !ok && len(r.beats) >= maxBeats {
		return
	}
	if at.After(r.beats[k]) {
		r.beats[k] = at
	}
}

// Via notes that the election of cluster belongs to the deployment conn:
// a checked message of cluster came in a batch of conn's. At most
// maxBeats clusters are noted; one beyond is not, and its leaders are
// heard by their heartbeats alone.
func (r *Recorder) Via(cluster, conn string) {
	if old, ok := r.via[cluster]; ok && old == conn || !ok && len(r.via) >= maxBeats {
		return
	}
	r.via[cluster] = conn
}

// beatOf is when the process of member, in cluster's deployment, last
// beat; zero if unknown.
func (r *Recorder) beatOf(cluster string, member uint64) time.Time {
	conn, ok := r.via[cluster]
	if !ok {
		return time.Time{}
	}
	return r.beats[beatKey{conn, member}]
}
