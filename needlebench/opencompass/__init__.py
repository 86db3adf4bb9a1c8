"""OpenCompass's side of the plugin: the classes its configs name, each asking the core what to do.

The partitioner asks the run folder's wing (``needlebench.runfolder``) for the run's plan and renders the
pieces not done as tasks; the dataset, inferencer and evaluator read rows from the cache and grade through
``grading``; the summarizer writes the reports (``report``); the API model admits requests by ``flow``. The
config builders (``configs``, ``models``) live here too. With ``needlebench.launch`` (how a process starts
OpenCompass's code, lean) and ``needlebench.parity`` (``needlebench parity``'s side-by-side run), this is the only
code that imports OpenCompass or mmengine.
"""
