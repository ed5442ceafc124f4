"""Talking to models: the one OpenAI-compatible client over a transport seam (``client``), the bounded
worker pool that drains a stage's calls (``dispatch``), an endpoint's slots shared between processes
(``lease``), endpoints as users name them (``endpoints``) and the embedded local model (``local``)."""
