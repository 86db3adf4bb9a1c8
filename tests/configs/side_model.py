# The prompt-scripted model both side-by-side runs use (side_builtin.py: OpenCompass's own NeedleBench v2,
# side_ours.py: ours): its answer is a pure function of the prompt, so identical prompts get identical answers.
models = [
    dict(
        type="prompt_scripted.PromptScriptedModel",
        abbr="scripted",
        max_seq_len=2_000_000,
        max_out_len=64,
        batch_size=64,
        run_cfg=dict(num_gpus=0),
    )
]
