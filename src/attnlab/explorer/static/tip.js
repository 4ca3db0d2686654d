/* attnlab's tooltip, shared by the explorer's panels (draw.js) and the notebook views (views.js):
 * attnlabTip(node) -> {show(text, event), hide()}, the text beside the pointer in ``node``.
 * Plain JavaScript, no library; defined once however many pages or views load it. */
window.attnlabTip = window.attnlabTip || function (node) {
  "use strict";
  return {
    show: function (text, ev) {
      node.textContent = text;
      node.hidden = false;
      node.style.left = (ev.clientX + 14) + "px";
      node.style.top = (ev.clientY + 14) + "px";
    },
    hide: function () { node.hidden = true; }
  };
};
