
(function(){
  var data = JSON.parse(document.getElementById('readiness-data').textContent);
  var box = document.getElementById('details');
  function esc(s){ var d = document.createElement('div'); d.textContent = s; return d.innerHTML; }
  function show(key){
    var d = data.keys[key]; if(!d){ return; }
    var h = '<button class="close" type="button" aria-label="close">close</button><h2>' + esc(d.title) + '</h2>';
    if(d.rows.length){
      h += '<table><thead><tr><th style="width:18%">check</th><th style="width:9%">status</th><th>found</th>' +
           '<th style="width:22%">expected</th><th style="width:24%">fix</th></tr></thead><tbody>';
      d.rows.forEach(function(i){
        var r = data.rows[i];
        h += '<tr class="st-' + esc(r[1]) + '">' + r.map(function(c){ return '<td>' + esc(c) + '</td>'; }).join('') +
             '</tr>';
      });
      h += '</tbody></table>';
    }
    if(d.text){ h += '<p>' + esc(d.text) + '</p>'; }
    box.innerHTML = h; box.className = 'open'; box.setAttribute('data-key', key);
    box.querySelector('.close').addEventListener('click', function(){ box.className = ''; });
  }
  document.addEventListener('click', function(ev){
    var el = ev.target.closest ? ev.target.closest('[data-k]') : null;
    if(el){
      var prev = document.querySelector('.sel'); if(prev){ prev.classList.remove('sel'); }
      el.classList.add('sel'); show(el.getAttribute('data-k'));
    }
  });
  document.addEventListener('keydown', function(ev){ if(ev.key === 'Escape'){ box.className = ''; } });
  document.body.setAttribute('data-ready', '1');
})();
