def rows(letter):
    pass
