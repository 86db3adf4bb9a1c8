"""OpenCompass v2's NeedleBench prompt wording, verbatim (quirks included).

Published NeedleBench scores were produced with these texts, so the
``reference`` protocol uses them character for character: the ATC prompt of
each question type, ATC's relationship sentence templates and terms (among
them the "not just a ..., but also a friend" form the 2025 paper's
hallucination analysis depends on) and the M-RS frame with its worked
examples. Taken from ``opencompass/datasets/needlebench_v2/atc.py`` and
``multi.py`` of OpenCompass 0.5.4; the parity tests rebuild prompts with that
installed code and compare. The strings are ``str.format`` templates:
``{shuffled_story}``, ``{last_person}``, ``{person}``, ``{n}``, ``{person_a}``,
``{person_b}``, ``{context}``, ``{retrieval_question}``; ``{{}}`` is a literal
pair of braces.
"""

from __future__ import annotations

__all__ = [
    "REFERENCE_PROMPTS",
    "REFERENCE_TEMPLATES",
    "REFERENCE_TERMS",
    "MRS_REFERENCE_FRAMES",
    "MRS_REFERENCE_QUESTION",
]

REFERENCE_PROMPTS: dict[tuple[str, str], str] = {
    (
        "en",
        "eldest_ancestor",
    ): "Here is a test for multi-step reasoning ability called the Ancestral Trace Challenge. In this test, we will simulate different people's familial relationships, and your task is to continuously reason through them until you identify the eldest ancestor.\n\nFor example:\nExample 1: If James Hill's father is Jasmine Lane, and no further information about familial relationships is provided in the text, then the oldest relative James Hill can trace back to in the provided text is \\boxed{{Jasmine Lane}}.\nExample 2: If Andrew Williams's grandmother is Dan Newton, and Dan Newton's father is James Hill, and no further information about familial relationships is provided in the text, then the oldest relative Andrew Williams can trace back to in the provided text is \\boxed{{James Hill}}.\nExample 3: If Jeff White's father is Kevin Le, Dan Newton's grandmother is Jeff White, and Jeff White's father is Kevin Le, and Shelley Mills is Dan Newton's great-granddaughter, and no further information about familial relationships is provided in the text, then the oldest relative Shelley Mills can trace back to in the provided text is \\boxed{{Kevin Le}}.\n\nNotes:\n1. You do not need to worry about the gender consistency of names in this test. For example, a name that is typically considered feminine can still be the father of another person. Our primary focus is on who is older.\n2. Ignore surname inheritance issues. For instance, Andrew Williams could still be the biological father of Christopher Baker. We only care about who is older and do not need to consider whether a child should inherit the father's or mother's surname.\n3. At the end of your response, remember to put your final answer within \\boxed{{}}. For example: \"So the oldest relative '{last_person}' can trace back to in the provided text is \\boxed{{somebody (your answer here)}}.\"\n\nNow, the scrambled family relationships are provided below:\n{shuffled_story}\n\nGiven the scrambled family relationships described above, who is the eldest relative that '{last_person}' can trace back to in the context?\n",
    (
        "zh",
        "eldest_ancestor",
    ): "下面是对你的多步推理能力的测试，这个测试叫做祖先追溯测试，我们会模拟不同人的家庭亲属关系，你的任务是在其中不断推理，直到找到最年长的祖先。\n                \n例如：\n例子1.如果张强的父亲是马克，除此以外提供的文本中没有更多关于亲属关系的信息，那么在提供的文本中张强能够向上追溯到的最年长的亲人就是马克。\n例子2.如果李明的姥姥是张红，而张红的父亲是张强，除此以外提供的文本中没有更多关于亲属关系的信息，那么在提供的文本中李明能够向上追溯到的最年长的亲人就是张强。\n例子3.如果小明是张红的曾孙女，张红的祖母是王华，王华的父亲是王刚，除此以外提供的文本中没有更多关于亲属关系的信息，那么小明能够向上追溯到的最年长的亲人就是王刚。\n\n注意：\n1. 你不必纠结这个测试中的人名的性别关系，例如，一个通常被视为女性化的名字仍然可以是其他人的父亲，我们的重点是谁更年长。\n2. 忽略这个测试中的姓氏遗传问题，例如，李明仍然可能是王鹏的亲生父亲，我们只关注谁更年长，不必纠结孩子是否应该继承父亲或母亲的性别。\n3. 在回答的最后，将你的答案放在\\boxed{{}}中，例如：\"所以{last_person}能向上追溯到的最年长的亲人就是\\boxed{{某人（你的答案）}}\"\n\n现在，打乱的家族关系文本如下：\n{shuffled_story}\n\n在上面提供的打乱的家族关系文本中，'{last_person}'的能够向上追溯到的最年长的亲人是谁？\n",
    (
        "en",
        "nth_ancestor",
    ): "Here is a test for multi-step reasoning ability called the Ancestral Trace Challenge. In this test, we will simulate different people's familial relationships, and your task is to identify a specific ancestor of a given person.\n\nFor example:\nExample 1: If James Hill's father is Jasmine Lane, then Jasmine Lane is James Hill's 1st generation ancestor.\nExample 2: If Andrew Williams's grandmother is Dan Newton (grandmother counts as 2 generations), and Dan Newton's father is James Hill, then Dan Newton is Andrew Williams's 2nd generation ancestor, and James Hill is Andrew Williams's 3rd generation ancestor.\nExample 3: If Shelley Mills's grandfather is Jeff White (grandfather counts as 2 generations), and Jeff White's mother is Mary Johnson, then Jeff White is Shelley Mills's 2nd generation ancestor, and Mary Johnson is Shelley Mills's 3rd generation ancestor.\n\nNotes:\n1. You do not need to worry about the gender consistency of names in this test. We only care about generational relationships.\n2. Ignore surname inheritance issues. We only care about familial relationships.\n3. Father/mother/dad/mom count as 1 generation, while grandfather/grandmother/maternal grandmother/maternal grandfather/paternal grandfather/paternal grandmother count as 2 generations.\n4. At the end of your response, remember to put your final answer within \\boxed{{}}. For example: \"So the {n}th generation ancestor of '{person}' is \\boxed{{somebody (your answer here)}}.\"\n\nNow, the scrambled family relationships are provided below:\n{shuffled_story}\n\nGiven the scrambled family relationships described above, who is the {n}th generation ancestor of '{person}'?\n",
    (
        "zh",
        "nth_ancestor",
    ): "下面是对你的多步推理能力的测试，这个测试叫做祖先追溯测试，我们会模拟不同人的家庭亲属关系，你的任务是在其中不断推理，找到指定人物的特定代祖先。\n\n例如：\n例子1.如果张强的父亲是马克，我们说马克是张强的1代祖先。\n例子2.如果李明的姥姥是张红（姥姥算两代关系），而张红的父亲是张强，那么张红是李明的2代祖先，张强是李明的3代祖先。\n例子3.如果小明的奶奶是王华（奶奶算两代关系），王华的妈妈是刘芳，那么王华是小明的2代祖先，刘芳是小明的3代祖先。\n\n注意：\n1. 你不必纠结这个测试中的人名的性别关系，我们只关注辈分关系。\n2. 忽略这个测试中的姓氏遗传问题，我们只关注亲属关系。\n3. 父亲/母亲/爸爸/妈妈算1代关系，爷爷/奶奶/姥姥/姥爷/外公/外婆算2代关系。\n4. 在回答的最后，将你的答案放在\\boxed{{}}中，例如：\"所以{person}的{n}代祖先就是\\boxed{{某人（你的答案）}}\"\n\n现在，打乱的家族关系文本如下：\n{shuffled_story}\n\n在上面提供的打乱的家族关系文本中，'{person}'的{n}代祖先是谁？\n",
    (
        "en",
        "nth_descendant",
    ): "Here is a test for multi-step reasoning ability called the Ancestral Trace Challenge. In this test, we will simulate different people's familial relationships, and your task is to identify a specific descendant of a given person.\n\nFor example:\nExample 1: If Jasmine Lane is James Hill's father, then James Hill is Jasmine Lane's 1st generation descendant.\nExample 2: If Dan Newton is Andrew Williams's grandmother (grandmother counts as 2 generations), and James Hill is Dan Newton's father, then Andrew Williams is Dan Newton's 2nd generation descendant, and Andrew Williams is James Hill's 3rd generation descendant.\nExample 3: If Jeff White is Shelley Mills's grandfather (grandfather counts as 2 generations), and Mary Johnson is Jeff White's mother, then Shelley Mills is Jeff White's 2nd generation descendant, and Shelley Mills is Mary Johnson's 3rd generation descendant.\n\nNotes:\n1. You do not need to worry about the gender consistency of names in this test. We only care about generational relationships.\n2. Ignore surname inheritance issues. We only care about familial relationships.\n3. Father/mother/dad/mom count as 1 generation, while grandfather/grandmother/maternal grandmother/maternal grandfather/paternal grandfather/paternal grandmother count as 2 generations.\n4. At the end of your response, remember to put your final answer within \\boxed{{}}. For example: \"So the {n}th generation descendant of '{person}' is \\boxed{{somebody (your answer here)}}.\"\n\nNow, the scrambled family relationships are provided below:\n{shuffled_story}\n\nGiven the scrambled family relationships described above, who is the {n}th generation descendant of '{person}'?\n",
    (
        "zh",
        "nth_descendant",
    ): "下面是对你的多步推理能力的测试，这个测试叫做家族关系追溯测试，我们会模拟不同人的家庭亲属关系，你的任务是在其中不断推理，找到指定人物的特定代子孙。\n\n例如：\n例子1.如果马克是张强的父亲，我们说张强是马克的1代子孙。\n例子2.如果张红是李明的姥姥（姥姥算两代关系），而张强是张红的父亲，那么李明是张红的2代子孙，李明是张强的3代子孙。\n例子3.如果王华是小明的爷爷（爷爷算两代关系），刘芳是王华的妈妈，那么小明是王华的2代子孙，小明是刘芳的3代子孙。\n\n注意：\n1. 你不必纠结这个测试中的人名的性别关系，我们只关注辈分关系。\n2. 忽略这个测试中的姓氏遗传问题，我们只关注亲属关系。\n3. 父亲/母亲/爸爸/妈妈算1代关系，爷爷/奶奶/姥姥/姥爷/外公/外婆算2代关系。\n4. 在回答的最后，将你的答案放在\\boxed{{}}中，例如：\"所以{person}的{n}代子孙就是\\boxed{{某人（你的答案）}}\"\n\n现在，打乱的家族关系文本如下：\n{shuffled_story}\n\n在上面提供的打乱的家族关系文本中，'{person}'的{n}代子孙是谁？\n",
    (
        "en",
        "relationship_distance",
    ): "Here is a test for multi-step reasoning ability called the Ancestral Trace Challenge. In this test, we will simulate different people's familial relationships, and your task is to calculate the relationship distance between two individuals.\n\nThe relationship distance is defined as the minimum number of generational gaps needed to go from one person to another in the family graph. Note that different relationships have different generational gaps. For example:\nExample 1: If Jasmine Lane is James Hill's father (father counts as 1 generation), then the relationship distance between James Hill and Jasmine Lane is 1.\nExample 2: If Dan Newton is Andrew Williams's grandmother (grandmother counts as 2 generations), and James Hill is Dan Newton's father (father counts as 1 generation), then the relationship distance between Andrew Williams and Dan Newton is 2, and the relationship distance between Andrew Williams and James Hill is 3.\nExample 3: If Jeff White is Shelley Mills's grandfather (grandfather counts as 2 generations), and Mary Johnson is Jeff White's mother (mother counts as 1 generation), then the relationship distance between Shelley Mills and Jeff White is 2, and the relationship distance between Shelley Mills and Mary Johnson is 3.\n\nNotes:\n1. You do not need to worry about the gender consistency of names in this test. We only care about relationship connections.\n2. Ignore surname inheritance issues. We only care about familial relationships.\n3. Father/mother/dad/mom count as 1 generation, while grandfather/grandmother/maternal grandmother/maternal grandfather/paternal grandfather/paternal grandmother count as 2 generations.\n4. At the end of your response, remember to put your final answer within \\boxed{{}}. For example: \"So the relationship distance between '{person_a}' and '{person_b}' is \\boxed{{5}}.\"\n\nNow, the scrambled family relationships are provided below:\n{shuffled_story}\n\nGiven the scrambled family relationships described above, what is the relationship distance between '{person_a}' and '{person_b}'?\n",
    (
        "zh",
        "relationship_distance",
    ): "下面是对你的多步推理能力的测试，这个测试叫做家族关系追溯测试，我们会模拟不同人的家庭亲属关系，你的任务是在其中不断推理，计算两个人之间的关系距离。\n\n关系距离定义为：家族图中从一个人到另一个人所需的最少代数差距。注意不同关系有不同的代数差距，例如：\n例子1.如果马克是张强的父亲（父亲算1代关系），那么张强和马克之间的关系距离是1。\n例子2.如果张红是李明的姥姥（姥姥算2代关系），而张强是张红的父亲（父亲算1代关系），那么李明和张红之间的关系距离是2，李明和张强之间的关系距离是3。\n例子3.如果小明的爷爷是王华（爷爷算2代关系），王华的妈妈是刘芳（妈妈算1代关系），那么小明和王华之间的关系距离是2，小明和刘芳之间的关系距离是3。\n\n注意：\n1. 你不必纠结这个测试中的人名的性别关系，我们只关注辈分关系。\n2. 忽略这个测试中的姓氏遗传问题，我们只关注亲属关系。\n3. 父亲/母亲/爸爸/妈妈算1代关系，爷爷/奶奶/姥姥/姥爷/外公/外婆算2代关系。\n4. 在回答的最后，将你的答案放在\\boxed{{}}中，例如：\"所以{person_a}和{person_b}之间的关系距离是\\boxed{{5}}\"\n\n现在，打乱的家族关系文本如下：\n{shuffled_story}\n\n在上面提供的打乱的家族关系文本中，'{person_a}'和'{person_b}'之间的关系距离是多少？\n",
}
REFERENCE_TEMPLATES: dict[str, tuple[str, ...]] = {
    "en": (
        "{A} is {B}'s {relationship}.",
        "{B}'s {relationship} is {A}.",
        "{A}, as {B}'s {relationship}, has a significant impact on {B}'s upbringing.",
        "{A} is not only {B}'s {relationship} but also {B}'s role model.",
        "During {B}'s upbringing, {A} was not only {B}'s {relationship}, but also {B}'s guardian.",
        "For {B}, {A} is not just a {relationship}, but also a friend.",
        "For {B}, {A} is more than just a {relationship}; {A} is a lifelong mentor of {B}.",
    ),
    "zh": (
        "{A}是{B}的{relationship}。",
        "{B}的{relationship}是{A}。",
        "{A}作为{B}的{relationship}，对{B}的成长有重要影响。",
        "{A}不仅是{B}的{relationship}，还是{B}的榜样。",
        "{A}在{B}的成长过程中，不仅仅是{B}的{relationship}，还是{B}的监护人。",
        "{A}对{B}来说，不只是一个{relationship}，还是一个朋友。",
    ),
}
REFERENCE_TERMS: dict[str, tuple[str, ...]] = {
    "en": (
        "father",
        "mother",
        "dad",
        "mom",
        "grandfather",
        "grandmother",
        "maternal grandmother",
        "maternal grandfather",
        "paternal grandfather",
        "paternal grandmother",
    ),
    "zh": ("父亲", "母亲", "爸爸", "妈妈", "爷爷", "奶奶", "姥姥", "姥爷", "外公", "外婆"),
}
MRS_REFERENCE_FRAMES: dict[tuple[str, str], str] = {
    (
        "zh",
        "end",
    ): "这是一个长文本能力的测试，你需要首先阅读下面的长文档，然后根据文档中的信息回答最后的问题。\n长文档的内容如下\n\n<文档>\n{context}\n</文档>\n\n根据文档中的信息，现在请问：{retrieval_question}\n\n例如：\n例子1.如果张强的父亲是马克，除此以外提供的文本中没有更多关于亲属关系的信息，那么在提供的文本中张强能够向上追溯到的最年长的亲人就是马克。\n例子2.如果李明的姥姥是张红，而张红的父亲是张强，除此以外提供的文本中没有更多关于亲属关系的信息，那么在提供的文本中李明能够向上追溯到的最年长的亲人就是张强。\n例子3.如果小明是张红的曾孙女，张红的祖母是王华，王华的父亲是王刚，除此以外提供的文本中没有更多关于亲属关系的信息，那么小明能够向上追溯到的最年长的亲人就是王刚。\n\n注意：\n1. 你不必纠结这个测试中的人名的性别关系，例如，一个通常被视为女性化的名字仍然可以是其他人的父亲，我们的重点是谁更年长。\n2. 忽略这个测试中的姓氏遗传问题，例如，李明仍然可能是王鹏的亲生父亲，我们只关注谁更年长，不必纠结孩子是否应该继承父亲或母亲的性别。\n3. 在回答的最后，将你的答案放在\\boxed{{}}中，例如：“所以{last_person}能向上追溯到的最年长的亲人就是\\boxed{{（你的答案）}}”\n\n",
    (
        "zh",
        "start",
    ): "这是一个长文本能力的测试，你需要首先阅读下面的问题，然后根据最后长文档中的信息回答下面的问题。\n现在请问：{retrieval_question}\n\n例如：\n例子1.如果张强的父亲是马克，除此以外提供的文本中没有更多关于亲属关系的信息，那么在提供的文本中张强能够向上追溯到的最年长的亲人就是马克。\n例子2.如果李明的姥姥是张红，而张红的父亲是张强，除此以外提供的文本中没有更多关于亲属关系的信息，那么在提供的文本中李明能够向上追溯到的最年长的亲人就是张强。\n例子3.如果小明是张红的曾孙女，张红的祖母是王华，王华的父亲是王刚，除此以外提供的文本中没有更多关于亲属关系的信息，那么小明能够向上追溯到的最年长的亲人就是王刚。\n\n注意：\n1. 你不必纠结这个测试中的人名的性别关系，例如，一个通常被视为女性化的名字仍然可以是其他人的父亲，我们的重点是谁更年长。\n2. 忽略这个测试中的姓氏遗传问题，例如，李明仍然可能是王鹏的亲生父亲，我们只关注谁更年长，不必纠结孩子是否应该继承父亲或母亲的性别。\n3. 在回答的最后，将你的答案放在\\boxed{{}}中，例如：“所以{last_person}能向上追溯到的最年长的亲人就是\\boxed{{（你的答案）}}”\n\n长文档内容的如下\n\n<文档>\n{context}\n</文档>\n\n",
    (
        "en",
        "end",
    ): "This is a test of long-text capability. You need to first read the long document below, and then answer the final question based on the information in the document.\nThe content of the long document is as follows\n\n<Document>\n{context}\n</Document>\n\nBased on the information in the document, now please answer: {retrieval_question}\n\nFor example:\nExample 1: If James Hill's father is Jasmine Lane, and no further information about familial relationships is provided in the text, then the oldest relative James Hill can trace back to in the provided text is \\boxed{{Jasmine Lane}}.\nExample 2: If Andrew Williams's grandmother is Dan Newton, and Dan Newton's father is James Hill, and no further information about familial relationships is provided in the text, then the oldest relative Andrew Williams can trace back to in the provided text is \\boxed{{James Hill}}.\nExample 3: If Jeff White's father is Kevin Le, Dan Newton's grandmother is Jeff White, and Jeff White's father is Kevin Le, and Shelley Mills is Dan Newton's great-granddaughter, and no further information about familial relationships is provided in the text, then the oldest relative Shelley Mills can trace back to in the provided text is \\boxed{{Kevin Le}}.\n\nNotes:\n1. You do not need to worry about the gender consistency of names in this test. For example, a name that is typically considered feminine can still be the father of another person. Our primary focus is on who is older.\n2. Ignore surname inheritance issues. For instance, Andrew Williams could still be the biological father of Christopher Baker. We only care about who is older and do not need to consider whether a child should inherit the father's or mother's surname.\n3. At the end of your response, remember to put your final answer within \\boxed{{}}. For example: \"So the oldest relative '{last_person}' can trace back to in the provided text is \\boxed{{(your answer here)}}.\"\n\n",
    (
        "en",
        "start",
    ): "This is a test of long-text capability. You need to first read the question below, and then answer it based on the information in the long document that follows.\nNow please answer: {retrieval_question}\n\nFor example:\nExample 1: If James Hill's father is Jasmine Lane, and no further information about familial relationships is provided in the text, then the oldest relative James Hill can trace back to in the provided text is \\boxed{{Jasmine Lane}}.\nExample 2: If Andrew Williams's grandmother is Dan Newton, and Dan Newton's father is James Hill, and no further information about familial relationships is provided in the text, then the oldest relative Andrew Williams can trace back to in the provided text is \\boxed{{James Hill}}.\nExample 3: If Jeff White's father is Kevin Le, Dan Newton's grandmother is Jeff White, and Jeff White's father is Kevin Le, and Shelley Mills is Dan Newton's great-granddaughter, and no further information about familial relationships is provided in the text, then the oldest relative Shelley Mills can trace back to in the provided text is \\boxed{{Kevin Le}}.\n\nNotes:\n1. You do not need to worry about the gender consistency of names in this test. For example, a name that is typically considered feminine can still be the father of another person. Our primary focus is on who is older.\n2. Ignore surname inheritance issues. For instance, Andrew Williams could still be the biological father of Christopher Baker. We only care about who is older and do not need to consider whether a child should inherit the father's or mother's surname.\n3. At the end of your response, remember to put your final answer within \\boxed{{}}. For example: \"So the oldest relative '{last_person}' can trace back to in the provided text is \\boxed{{(your answer here)}}.\"\n\nThe content of the long document is as follows\n\n<Document>\n{context}\n</Document>\n\n",
}
MRS_REFERENCE_QUESTION: dict[str, str] = {
    "en": "Given the context described above, who is the eldest relative that '{last_person}' can trace back to in the context?",
    "zh": "在上面提供的文本中，'{last_person}'的能够向上追溯到的最年长的亲人是谁？",
}
