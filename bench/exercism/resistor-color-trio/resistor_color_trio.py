def label(colors):
    pass
