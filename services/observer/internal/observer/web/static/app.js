// Live updates: the server pushes each changed cluster's section, rendered
// by the same template as the page; this script swaps it in.
(function () {
  const live = document.getElementById('live');
  const main = document.getElementById('clusters');
  function state(s, text) { live.dataset.state = s; live.textContent = text; }
  const es = new EventSource('/events');
  es.onopen = () => state('live', 'live');
  es.onerror = () => state('lost', 'reconnecting…');
  es.addEventListener('cluster', (e) => {
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
  });
})();
