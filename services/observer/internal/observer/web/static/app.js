// Live updates: the server pushes each changed cluster's section, rendered
// by the same template as the page; this script swaps it in.
(function () {
  const live = document.getElementById('live');
  const main = document.getElementById('clusters');
  function state(s, text) { live.dataset.state = s; live.textContent = text; }
  function onCluster(e) {
    const t = document.createElement('template');
    t.innerHTML = e.data.trim();
    const fresh = t.content.firstElementChild;
    if (!fresh) return;
    const old = document.getElementById(fresh.id);
    const changed = !old || old.querySelector('.current').dataset.term !== fresh.querySelector('.current').dataset.term;
    if (old) old.replaceWith(fresh); else main.append(fresh);
    const empty = document.getElementById('empty');
    if (empty) empty.remove();
    if (changed) fresh.classList.add('flash');
  }
  // The summary of the leaders, sent again after changes.
  function onSummary(e) {
    const t = document.createElement('template');
    t.innerHTML = e.data.trim();
    const fresh = t.content.firstElementChild;
    const old = document.getElementById('summary');
    if (fresh && old) old.replaceWith(fresh);
  }
  // EventSource reconnects by itself when the stream ends (the observer
  // ends each after its lifetime), but gives up on an error status (503
  // when the observer has as many streams open as it allows): then try
  // again after a while.
  function connect() {
    // The stream sends the clusters of this page: same search, same
    // page number.
    const es = new EventSource('/events' + location.search);
    es.onopen = () => state('live', 'live');
    es.onerror = () => {
      state('lost', 'reconnecting…');
      if (es.readyState === EventSource.CLOSED) setTimeout(connect, 5000);
    };
    es.addEventListener('cluster', onCluster);
    es.addEventListener('summary', onSummary);
  }
  connect();
})();
