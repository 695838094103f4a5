document.addEventListener('DOMContentLoaded', function () {
  function setAll(open) {
    document.querySelectorAll('details.query').forEach(function (d) { d.open = open; });
  }
  var expand = document.getElementById('expand-all');
  var collapse = document.getElementById('collapse-all');
  if (expand) { expand.addEventListener('click', function () { setAll(true); }); }
  if (collapse) { collapse.addEventListener('click', function () { setAll(false); }); }
  document.querySelectorAll('a[href^="#q-"]').forEach(function (a) {
    a.addEventListener('click', function () {
      var target = document.getElementById(a.getAttribute('href').slice(1));
      if (target && target.tagName === 'DETAILS') { target.open = true; }
    });
  });
  // texts the page keeps packed (a JSON list, raw-deflated, in base64): the bodies of the
  // blocks that start closed, and every distinct plan JSON once
  function unpack(id) {
    var packed = document.getElementById(id);
    if (!packed) { return Promise.resolve([]); }
    var bytes = Uint8Array.from(atob(packed.getAttribute('value')),
      function (c) { return c.charCodeAt(0); });
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate-raw'));
    return new Response(stream).text().then(JSON.parse);
  }
  function withPacked(then) {
    if (typeof DecompressionStream === 'undefined') { then(); return; }
    Promise.all([unpack('query-bodies'), unpack('plan-documents')]).then(function (found) {
      var bodies = found[0], documents = found[1];
      document.querySelectorAll('details.query[data-body]').forEach(function (block) {
        block.insertAdjacentHTML('beforeend', bodies[Number(block.getAttribute('data-body'))]);
      });
      // each download link gets its plan's JSON as a data: URL (the copy buttons read it)
      document.querySelectorAll('a.download-json').forEach(function (a) {
        var json = documents[Number(a.getAttribute('data-doc'))];
        a.setAttribute('href', 'data:application/json;charset=utf-8,' + encodeURIComponent(json));
      });
      then();
    });
  }
  function planJson(button) {
    var link = document.getElementById(button.getAttribute('data-plan'));
    var href = link ? link.getAttribute('href') || '' : '';
    return decodeURIComponent(href.slice(href.indexOf(',') + 1));
  }
  function setUpCopyButtons() {
    document.querySelectorAll('button.copy-json').forEach(function (button) {
      var json = planJson(button);
      var label = button.textContent;
      function copied(text) {
        button.textContent = text;
        setTimeout(function () { button.textContent = label; }, 1500);
      }
      button.title = 'copy ' + json.length + ' characters of EXPLAIN JSON (for pev2 / explain.dalibo.com)';
      button.setAttribute('data-length', String(json.length));
      function viaSelection() {
        var area = document.createElement('textarea');
        area.value = json;
        document.body.appendChild(area);
        area.select();
        var done = false;
        try { done = document.execCommand('copy'); } catch (e) { done = false; }
        document.body.removeChild(area);
        copied(done ? 'copied' : 'copy failed');
      }
      button.addEventListener('click', function () {
        if (navigator.clipboard && navigator.clipboard.writeText) {
          navigator.clipboard.writeText(json).then(function () { copied('copied'); },
            viaSelection);
        } else {
          viaSelection();
        }
      });
    });
  }
  withPacked(function () {
    setUpCopyButtons();
    document.body.setAttribute('data-ready', 'yes');
  });
});
